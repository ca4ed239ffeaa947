"""After a command at turns 25 and 35 of 40: a note on the remaining budget."""

# Rendered from the package's sources; its helpers are in sheetlib.py beside it.
# ruff: noqa
from __future__ import annotations

from sheetlib import arguments, run

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
