"""Before finishing: the prefilled (typed-in) cells of the answer range must be as in the input."""

from __future__ import annotations

from unscaffold.benchmarks.spreadsheet.bank_src.common import answer_ranges, prefilled_changes, run
from unscaffold.benchmarks.spreadsheet.bank_src.guard import opened, pairs


def main() -> int:
    fields, files = pairs()
    if fields.get("instruction_type", "").lower().startswith("sheet"):
        return 0  # the task rearranges its range
    for source, target, src, out in opened(files):
        changes = prefilled_changes(src, out, answer_ranges(fields["answer_position"], src.sheetnames))
        if changes:
            print(f"{target}: {len(changes)} prefilled cell(s) of answer_position differ from {source}; they are "
                  "examples of the expected values, restore them and check your rule against them: "
                  + "; ".join(changes[:10]))
            return 1
    return 0


if __name__ == "__main__":
    run(main)
