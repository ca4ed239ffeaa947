#!/bin/bash
echo 'granite' > /app/stone.txt
