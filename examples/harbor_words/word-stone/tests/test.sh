#!/bin/bash
if [ "$(cat /app/stone.txt 2>/dev/null)" = "granite" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
