#!/bin/bash
echo 'robin' > /app/bird.txt
