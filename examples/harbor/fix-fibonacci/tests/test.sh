#!/bin/bash
# Partial credit: the share of checked inputs that print the right value.
python3 - <<'PY'
import json, subprocess
expected = {0: 0, 1: 1, 2: 1, 10: 55, 20: 6765}
passed = 0
for n, want in expected.items():
    out = subprocess.run(["python3", "/app/fib.py", str(n)], capture_output=True, text=True, timeout=10)
    passed += out.stdout.strip() == str(want)
json.dump({"reward": passed / len(expected), "passed": passed}, open("/logs/verifier/reward.json", "w"))
PY
