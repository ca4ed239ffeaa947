"""After a command: when the same error line has come back three times in the last ten results, say so."""

# Rendered from the package's sources; its helpers are in sheetlib.py beside it.
# ruff: noqa
from __future__ import annotations

import json
import re
from pathlib import Path

from sheetlib import arguments, run

HISTORY = Path("/tmp/.spreadsheet-checks-errors")
PATTERN = re.compile(r"(?m)^\w*(?:Error|Exception)\b.*$")


def main() -> int:
    context = arguments()
    m = PATTERN.search(context.get("output", "")) if context.get("exit_code", 0) != 0 else None
    history = json.loads(HISTORY.read_text()) if HISTORY.is_file() else []
    history = (history + [m.group(0)[:200] if m else None])[-10:]
    try:
        HISTORY.write_text(json.dumps(history))
    except OSError:
        pass
    if m and history.count(m.group(0)[:200]) >= 3:
        print(f"The same error has come back {history.count(m.group(0)[:200])} times: {m.group(0)[:200]}. "
              "Inspect the workbook (sheet names, header row, cell types) and change the approach.")
        return 1
    return 0


if __name__ == "__main__":
    run(main)
