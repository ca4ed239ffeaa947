"""After a command at turns 25 and 35 of 40: a note on the remaining budget."""

# Self-contained script: the helpers it needs are included below.
# ruff: noqa

from __future__ import annotations

import json
import sys
from typing import Any

class Problem(Exception):
    pass

def arguments() -> dict[str, Any]:
    try:
        return json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    except json.JSONDecodeError as e:
        raise Problem(f'the arguments are not JSON: {e}') from None

def run(main: Any) -> None:
    try:
        code = main()
    except Problem as e:
        print(e)
        code = 1
    sys.exit(code or 0)

NOTES = {25: 15, 35: 5}


def main() -> int:
    turn = int(arguments().get("turn", 0))
    if turn in NOTES:
        print(f"Turn budget: {turn} of 40 turns used, {NOTES[turn]} left. Write the output workbook now if it "
              "is not written, verify it, and finish.")
        return 1
    return 0


if __name__ == "__main__":
    run(main)
