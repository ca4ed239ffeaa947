"""Before finishing: the prefilled (typed-in) cells of the answer range must be as in the input."""

# Rendered from the package's sources; its helpers are in sheetlib.py beside it.
# ruff: noqa
from __future__ import annotations

from pathlib import Path

from sheetlib import Problem, answer_ranges, open_book, prefilled_changes, run
from sheetlib import pairs


def main() -> int:
    fields, files = pairs()
    if fields.get("instruction_type", "").lower().startswith("sheet"):
        return 0  # the task rearranges its range
    for source, target in files:
        if not Path(target).is_file():
            continue  # the output check reports it
        try:
            src, out = open_book(source), open_book(target)
        except Problem:
            continue
        changes = prefilled_changes(src, out, answer_ranges(fields["answer_position"], src.sheetnames))
        if changes:
            print(f"{target}: {len(changes)} prefilled cell(s) of answer_position differ from {source}; they are "
                  "examples of the expected values, restore them and check your rule against them: "
                  + "; ".join(changes[:10]))
            return 1
    return 0


if __name__ == "__main__":
    run(main)
