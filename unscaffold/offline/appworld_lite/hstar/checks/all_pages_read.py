# Before complete_task: every list the student read must have been read to its end (a page shorter than
# page_limit, usually the empty page after the last one). Reads the world's call log.
import json
import sys

from calllog import log_at_submit

groups: dict[tuple[str, str, str], list[dict]] = {}
for entry in log_at_submit():
    if entry.get("ok") and entry.get("paged"):
        filters = {k: v for k, v in entry.get("args", {}).items() if k not in ("page_index", "page_limit")}
        key = (entry["app"], entry["api"], json.dumps(filters, sort_keys=True))
        groups.setdefault(key, []).append(entry)
unfinished = [(key, entries) for key, entries in groups.items()
              if not any(e.get("count", 0) < e.get("page_limit", 5) for e in entries)]
if unfinished:
    print("Some lists were not read to the end; page on until a page comes back empty before complete_task:")
    for (app, api, filters_json), entries in unfinished[:8]:
        shown = ", ".join(f"{k}={v!r}" for k, v in json.loads(filters_json).items())
        last = max(e.get("page_index", 0) for e in entries)
        print(f"  apis.{app}.{api}({shown}): pages up to page_index={last} were all full")
    sys.exit(1)
