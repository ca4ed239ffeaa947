#!/bin/bash
if [ "$(cat /app/drink.txt 2>/dev/null)" = "cocoa" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
