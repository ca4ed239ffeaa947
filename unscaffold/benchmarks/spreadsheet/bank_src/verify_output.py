"""Check an output workbook against its input in the answer range: prefilled cells unchanged, formulas
recalculated without errors, and the range flags ALL_EMPTY, FORMULA_STRING, ERROR_LITERAL (these fail),
NUMERIC_STRING and SAME_VALUE (warnings). Prints the range's values; exits 1 when something fails.
For a Sheet-Level `instruction_type` (sorting, deleting rows) prefilled cells may move and are not compared."""

from __future__ import annotations

from unscaffold.benchmarks.spreadsheet.bank_src.common import (
    FAILING,
    answer_ranges,
    arguments,
    evaluate,
    find_sheet,
    has_formulas,
    name,
    open_book,
    prefilled_changes,
    range_cells,
    range_flags,
    run,
)
from unscaffold.benchmarks.spreadsheet.values import show


def main() -> int:
    args = arguments()
    src, out = open_book(args["input"]), open_book(args["output"])
    ranges = answer_ranges(args["answer_position"], src.sheetnames)
    computed = evaluate(args["output"]) if has_formulas(out) else None
    if has_formulas(out) and computed is None:
        print("note: formulas are not recalculated here (neither LibreOffice nor `formulas` is available)")
    shown = 0
    for rng in ranges:
        ws = find_sheet(out, rng.sheet or "")
        if ws is None:
            continue
        for row, col in range_cells(rng, find_sheet(src, rng.sheet or ""), ws):
            if shown < int(args.get("show", 12)):
                cell = ws.cell(row, col)
                value = computed.get((ws.title, row, col)) if computed and cell.data_type == "f" else cell.value
                formula = f" ({cell.value})" if cell.data_type == "f" else ""
                print(f"{name(ws.title, row, col)} = {show(value)}{formula}")
            shown += 1
    sheet_level = str(args.get("instruction_type", "")).strip().lower().startswith("sheet")
    changes = [] if sheet_level else prefilled_changes(src, out, ranges)
    flags = range_flags(src, out, ranges, computed)
    for line in changes:
        print(f"PREFILLED_CHANGED: {line}")
    for line in flags:
        print(line)
    failed = bool(changes) or any(f.startswith(FAILING) for f in flags)
    print(f"{shown} cell(s) in answer_position; " + ("FAILED" if failed else "OK: prefilled cells unchanged"))
    return 1 if failed else 0


if __name__ == "__main__":
    run(main)
