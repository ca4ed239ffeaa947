"""Before finishing: every output workbook exists, opens, and has the sheets answer_position names."""

from __future__ import annotations

from unscaffold.benchmarks.spreadsheet.bank_src.common import answer_ranges, find_sheet, open_book, run
from unscaffold.benchmarks.spreadsheet.bank_src.guard import pairs


def main() -> int:
    fields, files = pairs()
    for source, target in files:
        out = open_book(target)  # a missing or broken file is a Problem: printed, exit 1
        src = open_book(source)
        for rng in answer_ranges(fields["answer_position"], src.sheetnames):
            if find_sheet(out, rng.sheet or "") is None:
                print(f"{target} has no sheet {rng.sheet!r}, which answer_position names (it has {out.sheetnames})")
                return 1
    return 0


if __name__ == "__main__":
    run(main)
