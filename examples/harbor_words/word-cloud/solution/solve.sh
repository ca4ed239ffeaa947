#!/bin/bash
echo 'cirrus' > /app/cloud.txt
