#!/bin/bash
if [ "$(cat /app/bird.txt 2>/dev/null)" = "robin" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
