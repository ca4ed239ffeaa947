#!/bin/bash
if [ "$(cat /app/animal.txt 2>/dev/null)" = "otter" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
