# The world's call log (.apps/calls.jsonl: every API call, through a tool or from the student's own code),
# read by the checks beside this file.
import json
import re
import sys
from pathlib import Path

LOG = Path(".apps/calls.jsonl")


def read_log():
    """Every logged call, oldest first; none before the world has logged one."""
    return [json.loads(line) for line in LOG.read_text().splitlines() if line.strip()] if LOG.is_file() else []


def log_at_submit():
    """The log when the pending command calls complete_task; otherwise the check has nothing to say (exit 0)."""
    context = json.loads(sys.argv[1])
    if not re.search(r"complete_task", context.get("command", "")) or not LOG.is_file():
        sys.exit(0)
    return read_log()
