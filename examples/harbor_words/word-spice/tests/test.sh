#!/bin/bash
if [ "$(cat /app/spice.txt 2>/dev/null)" = "cumin" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
