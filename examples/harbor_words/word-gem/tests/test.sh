#!/bin/bash
if [ "$(cat /app/gem.txt 2>/dev/null)" = "ruby" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
