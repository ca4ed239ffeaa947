"""Before finishing: the answer range is not empty and holds no formula typed as text or error literal;
numbers stored as text and one value repeated over the whole range stop the finish once, as warnings."""

from __future__ import annotations

from unscaffold.benchmarks.spreadsheet.bank_src.common import (
    FAILING,
    answer_ranges,
    evaluate,
    has_formulas,
    range_flags,
    run,
)
from unscaffold.benchmarks.spreadsheet.bank_src.guard import first_time, opened, pairs


def main() -> int:
    fields, files = pairs()
    for _, target, src, out in opened(files):
        computed = evaluate(target) if has_formulas(out) else None
        flags = range_flags(src, out, answer_ranges(fields["answer_position"], src.sheetnames), computed)
        blocking = [f for f in flags if f.startswith(FAILING)]
        warnings = [f for f in flags if not f.startswith(FAILING)]
        if blocking or (warnings and first_time(target + "\n".join(warnings))):
            note = "" if blocking else " (a warning: finish again if this is intended)"
            print(f"{target}: answer_position check{note}: " + "; ".join((blocking + warnings)[:8]))
            return 1
    return 0


if __name__ == "__main__":
    run(main)
