#!/bin/bash
if [ "$(cat /app/color.txt 2>/dev/null)" = "green" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
