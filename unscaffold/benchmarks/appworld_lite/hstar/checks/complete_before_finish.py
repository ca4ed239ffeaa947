# Before the final answer: the task must have been submitted with apis.supervisor.complete_task.
import json
import sys
from pathlib import Path

log_path = Path(".apps/calls.jsonl")
log = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()] if log_path.is_file() else []
if not any(e.get("ok") and e.get("kind") == "submit" for e in log):
    print("The task is not submitted yet: call apis.supervisor.complete_task(answer=...) with the answer, or "
          "apis.supervisor.complete_task() when the task asks no question.")
    sys.exit(1)
