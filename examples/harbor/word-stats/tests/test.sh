#!/bin/bash
expected=$'the 6\ncat 3\na 2'
# "a", "on", "sat" and "dog" all occur twice: "a" wins the tie by alphabetical order.
if [ "$(cat /app/top3.txt 2>/dev/null)" = "$expected" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
