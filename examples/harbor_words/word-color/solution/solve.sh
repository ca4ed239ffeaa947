#!/bin/bash
echo 'green' > /app/color.txt
