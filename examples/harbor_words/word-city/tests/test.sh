#!/bin/bash
if [ "$(cat /app/city.txt 2>/dev/null)" = "Lisbon" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
