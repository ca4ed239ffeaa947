#!/bin/bash
echo 'salmon' > /app/fish.txt
