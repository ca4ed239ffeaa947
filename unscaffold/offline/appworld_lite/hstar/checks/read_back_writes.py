# Before complete_task: every entity a write touched must have been read back with a show_ API
# (after the write; before it, for a delete). Reads the world's call log, so it sees tool calls too.
import sys

from calllog import log_at_submit

log = log_at_submit()


def keys(entry, with_result=True):
    """What names an entity: (key, id) for *_id fields, ("path", p) for paths (a move renames them)."""
    fields = dict(entry.get("args", {}))
    if with_result:
        fields.update(entry.get("result", {}))
    return {("path" if k.endswith("_path") else k, str(v)) for k, v in fields.items()
            if k.endswith(("_id", "_path"))}


unread = []
for i, entry in enumerate(log):
    if not entry.get("ok") or entry.get("kind") != "write" or not keys(entry):
        continue
    window = log[:i] if entry["api"].startswith("delete_") else log[i + 1:]
    if not any(e.get("ok") and e.get("kind") == "read" and e["api"].startswith("show_") and keys(e, False) & keys(entry)
               for e in window):
        unread.append(entry)
if unread:
    print("Before complete_task, read back what you changed (show_ the entity after the write; before a delete):")
    for entry in unread[:8]:
        named = ", ".join(f"{k}={v!r}" for k, v in sorted(entry.get("args", {}).items()))
        print(f"  apis.{entry['app']}.{entry['api']}({named}) was never read back")
    sys.exit(1)
