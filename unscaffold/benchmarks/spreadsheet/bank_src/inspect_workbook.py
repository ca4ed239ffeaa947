"""Show a workbook: its sheets with used ranges, the first rows of each, its formulas and, for an
answer_position, which cells of it are prefilled (examples to keep), formulas, or empty."""

from __future__ import annotations

from unscaffold.benchmarks.spreadsheet.bank_src.common import (
    answer_ranges,
    arguments,
    find_sheet,
    literal,
    name,
    open_book,
    range_cells,
    run,
)
from unscaffold.benchmarks.spreadsheet.values import show


def main() -> int:
    args = arguments()
    wb = open_book(args["path"])
    rows = int(args.get("rows", 8))
    print(f"{args['path']}: {len(wb.sheetnames)} sheet(s): {wb.sheetnames}")
    for ws in wb.worksheets:
        if args.get("sheet") and ws.title != args["sheet"]:
            continue
        cells = [c for row in ws.iter_rows() for c in row if c.value is not None]
        formulas = [c for c in cells if c.data_type == "f"]
        merged = ", ".join(str(m) for m in ws.merged_cells.ranges) or "none"
        print(f"\n== {ws.title!r}: used range {ws.dimensions} ({ws.max_row} rows x {ws.max_column} columns), "
              f"{len(formulas)} formula(s), merged: {merged}")
        for values in ws.iter_rows(min_row=1, max_row=min(ws.max_row, rows), values_only=True):
            print("  " + " | ".join(show(v) if v is not None else "" for v in values))
        if ws.max_row > rows:
            print(f"  ... {ws.max_row - rows} more row(s)")
        for c in formulas[:10]:
            print(f"  formula {c.coordinate}: {c.value}")
    position = args.get("answer_position")
    if position:
        prefilled: list[str] = []
        formula: list[str] = []
        empty = 0
        for rng in answer_ranges(position, wb.sheetnames):
            ws = find_sheet(wb, rng.sheet or "")
            if ws is None:
                print(f"\nanswer_position sheet {rng.sheet!r} is not in the workbook (to be created?)")
                continue
            for row, col in range_cells(rng, ws):
                cell = ws.cell(row, col)
                if literal(cell):
                    prefilled.append(f"{name(ws.title, row, col)}={show(cell.value)}")
                elif cell.data_type == "f":
                    formula.append(f"{name(ws.title, row, col)}: {cell.value}")
                else:
                    empty += 1
        print(f"\nanswer_position {position}: {len(prefilled)} prefilled, {len(formula)} "
              f"formula, {empty} empty cell(s)")
        if prefilled:
            print("prefilled cells (examples of the expected values; keep them): "
                  + "; ".join(prefilled[:20]))
        for line in formula[:10]:
            print(f"formula in the answer range {line}")
    return 0


if __name__ == "__main__":
    run(main)
