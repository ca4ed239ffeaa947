#!/bin/bash
if [ "$(cat /app/tree.txt 2>/dev/null)" = "maple" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
