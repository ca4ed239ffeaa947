import json
import sys
from pathlib import Path

args = json.loads(sys.argv[1])
path = Path(args["path"])
limit = int(args.get("max_lines", 50))
if not path.is_file():
    print(f"{path}: no such file")
    sys.exit(1)
lines = path.read_text(errors="replace").splitlines()
for number, line in enumerate(lines[:limit], 1):
    print(f"{number:>5}  {line}")
if len(lines) > limit:
    print(f"... {len(lines) - limit} more lines")
print(f"[{path}: {path.stat().st_size} bytes, {len(lines)} lines]")
