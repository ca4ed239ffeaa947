"""Write values into a copy of the input workbook, saved as the output. Cells that hold a typed-in
value in the input (prefilled examples) are kept unless `overwrite` is true. A value is a number, text,
true/false, null (clears the cell), a formula as text starting with `=`, or {"date": "YYYY-MM-DD"}."""

from __future__ import annotations

import datetime
from pathlib import Path

from unscaffold.benchmarks.spreadsheet.bank_src.common import (
    Problem,
    arguments,
    find_sheet,
    literal,
    name,
    open_book,
    run,
)
from unscaffold.benchmarks.spreadsheet.ranges import parse_ref


def typed(value: object) -> object:
    if isinstance(value, dict):
        if set(value) != {"date"}:
            raise Problem(f"unknown value object {value!r}: use {{\"date\": \"YYYY-MM-DD\"}}")
        try:
            return datetime.datetime.fromisoformat(str(value["date"]))
        except ValueError:
            raise Problem(f"not an ISO date: {value['date']!r}") from None
    return value


def main() -> int:
    args = arguments()
    source, target = args["input"], args["output"]
    src = open_book(source)
    out = open_book(target) if Path(target).is_file() else open_book(source)
    default = args.get("sheet") or src.sheetnames[0]
    written, kept = [], []
    for key, value in args["values"].items():
        sheet_name, _, ref = key.rpartition("!")
        sheet_name = sheet_name.strip("'").replace("''", "'") or default
        try:
            rng = parse_ref(ref)
        except ValueError as e:
            raise Problem(f"{key}: {e}") from None
        if rng.min_row != rng.max_row or rng.min_col != rng.max_col or rng.min_row is None or rng.min_col is None:
            raise Problem(f"{key}: name one cell per value")
        ws = find_sheet(out, sheet_name) or out.create_sheet(sheet_name)
        ws_in = find_sheet(src, sheet_name)
        before = ws_in.cell(rng.min_row, rng.min_col) if ws_in is not None else None
        where = name(ws.title, rng.min_row, rng.min_col)
        if literal(before) and not args.get("overwrite", False):
            kept.append(where)
            continue
        cell = ws.cell(rng.min_row, rng.min_col)
        cell.value = typed(value)
        if isinstance(cell.value, datetime.datetime):
            cell.number_format = "yyyy-mm-dd"
        written.append(where)
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    out.save(target)
    print(f"wrote {len(written)} cell(s) to {target}")
    if kept:
        print(f"kept {len(kept)} prefilled cell(s) as they are in the input: {', '.join(kept[:20])}")
    return 0


if __name__ == "__main__":
    run(main)
