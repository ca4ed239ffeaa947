"""Before finishing: formulas in the output recalculate without error values (#DIV/0!, #NAME?, #REF!, ...)."""

# Rendered from the package's sources; its helpers are in sheetlib.py beside it.
# ruff: noqa
from __future__ import annotations

from pathlib import Path

from sheetlib import Problem, evaluate, has_formulas, name, open_book, run
from sheetlib import pairs
from sheetlib import ERROR_LITERALS


def main() -> int:
    _, files = pairs()
    for _, target in files:
        if not Path(target).is_file():
            continue
        try:
            if not has_formulas(open_book(target)):
                continue
        except Problem:
            continue
        computed = evaluate(target) or {}
        errors = [f"{name(s, r, c)} = {v}" for (s, r, c), v in computed.items()
                  if isinstance(v, str) and v.strip() in ERROR_LITERALS]
        if errors:
            print(f"{target}: {len(errors)} formula(s) evaluate to an error: " + "; ".join(errors[:10]))
            return 1
    return 0


if __name__ == "__main__":
    run(main)
