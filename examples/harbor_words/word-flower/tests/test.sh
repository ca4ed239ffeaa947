#!/bin/bash
if [ "$(cat /app/flower.txt 2>/dev/null)" = "tulip" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
