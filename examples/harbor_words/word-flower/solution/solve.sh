#!/bin/bash
echo 'tulip' > /app/flower.txt
