#!/bin/bash
echo 'Mars' > /app/planet.txt
