#!/bin/bash
echo 'copper' > /app/metal.txt
