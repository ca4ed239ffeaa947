#!/bin/bash
python3 - <<'PY'
import re
from collections import Counter
words = re.findall(r"[a-z]+", open("/app/text.txt").read().lower())
top = sorted(Counter(words).items(), key=lambda kv: (-kv[1], kv[0]))[:3]
open("/app/top3.txt", "w").write("".join(f"{w} {c}\n" for w, c in top))
PY
