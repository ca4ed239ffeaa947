#!/bin/bash
if [ "$(cat /app/metal.txt 2>/dev/null)" = "copper" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
