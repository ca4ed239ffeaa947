#!/bin/bash
echo 'maple' > /app/tree.txt
