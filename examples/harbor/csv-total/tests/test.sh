#!/bin/bash
python3 - <<'PY'
from pathlib import Path
try:
    value = float(Path("/app/answer.txt").read_text().strip())
    ok = abs(value - 43.25) < 1e-9
except Exception:
    ok = False
Path("/logs/verifier/reward.txt").write_text("1\n" if ok else "0\n")
PY
