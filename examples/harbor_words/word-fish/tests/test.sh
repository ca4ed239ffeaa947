#!/bin/bash
if [ "$(cat /app/fish.txt 2>/dev/null)" = "salmon" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
