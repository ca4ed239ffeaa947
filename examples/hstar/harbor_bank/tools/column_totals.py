import csv
import json
import sys
from collections import defaultdict

args = json.loads(sys.argv[1])
with open(args["path"], newline="") as f:
    rows = list(csv.DictReader(f))
if not rows:
    print("no data rows")
    sys.exit(0)
columns = list(rows[0])
print("columns:", ", ".join(columns))
print("rows:", len(rows))


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


numeric = [c for c in columns if all(number(r[c]) is not None for r in rows)]
key = args.get("key")
groups = defaultdict(list)
for r in rows:
    groups[r[key] if key else "(all)"].append(r)
for group in sorted(groups):
    totals = ", ".join(f"{c}={sum(number(r[c]) for r in groups[group]):.2f}" for c in numeric)
    print(f"{group}: {totals}")
