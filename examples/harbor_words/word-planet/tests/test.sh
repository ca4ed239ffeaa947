#!/bin/bash
if [ "$(cat /app/planet.txt 2>/dev/null)" = "Mars" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
