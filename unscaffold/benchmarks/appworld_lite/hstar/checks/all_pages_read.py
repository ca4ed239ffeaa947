# Before complete_task: every list the student read must have been read to its end (a page shorter than
# page_limit, usually the empty page after the last one). Reads the world's call log.
import json
import re
import sys
from pathlib import Path

context = json.loads(sys.argv[1])
if not re.search(r"complete_task", context.get("command", "")):
    sys.exit(0)
log_path = Path(".apps/calls.jsonl")
if not log_path.is_file():
    sys.exit(0)
groups = {}
for line in log_path.read_text().splitlines():
    entry = json.loads(line) if line.strip() else {}
    if entry.get("ok") and entry.get("paged"):
        filters = {k: v for k, v in entry.get("args", {}).items() if k not in ("page_index", "page_limit")}
        key = (entry["app"], entry["api"], json.dumps(filters, sort_keys=True))
        groups.setdefault(key, []).append(entry)
unfinished = [(key, entries) for key, entries in groups.items()
              if not any(e.get("count", 0) < e.get("page_limit", 5) for e in entries)]
if unfinished:
    print("Some lists were not read to the end; page on until a page comes back empty before complete_task:")
    for (app, api, filters), entries in unfinished[:8]:
        shown = ", ".join(f"{k}={v!r}" for k, v in json.loads(filters).items())
        last = max(e.get("page_index", 0) for e in entries)
        print(f"  apis.{app}.{api}({shown}): pages up to page_index={last} were all full")
    sys.exit(1)
