#!/bin/bash
if [ "$(cat /app/fruit.txt 2>/dev/null)" = "apple" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
