#!/bin/bash
echo 'Danube' > /app/river.txt
