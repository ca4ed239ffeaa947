#!/bin/bash
if [ "$(cat /app/cloud.txt 2>/dev/null)" = "cirrus" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
