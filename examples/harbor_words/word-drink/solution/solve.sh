#!/bin/bash
echo 'cocoa' > /app/drink.txt
