#!/bin/bash
if [ "$(cat /app/river.txt 2>/dev/null)" = "Danube" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
