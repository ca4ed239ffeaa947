#!/bin/bash
awk -F, 'NR > 1 && $1 == "north" { s += $2 } END { printf "%.2f\n", s }' /app/sales.csv > /app/answer.txt
