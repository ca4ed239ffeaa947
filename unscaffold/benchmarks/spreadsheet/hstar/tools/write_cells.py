"""Write values into a copy of the input workbook, saved as the output. Cells that hold a typed-in
value in the input (prefilled examples) are kept unless `overwrite` is true. A value is a number, text,
true/false, null (clears the cell), a formula as text starting with `=`, or {"date": "YYYY-MM-DD"}."""

# Self-contained script: the helpers it needs are included below.
# ruff: noqa

from __future__ import annotations

import datetime
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_COL = 16384

MAX_ROW = 1048576

_SPACES = re.compile('[\\s\\u00a0\\u2007\\u202f\\ufeff]+')

_ENDPOINT = re.compile('^([A-Z]{0,3})([0-9]*)$')

class RangeError(ValueError):
    pass

def column_index(letters: str) -> int:
    n = 0
    for ch in letters.upper():
        n = n * 26 + ord(ch) - 64
    return n

def column_letters(index: int) -> str:
    out = ''
    while index > 0:
        index, rest = divmod(index - 1, 26)
        out = chr(65 + rest) + out
    return out

def quote_sheet(name: str) -> str:
    if re.fullmatch('[A-Za-z_][A-Za-z0-9_.]*', name):
        return name
    return "'" + name.replace("'", "''") + "'"

@dataclass(frozen=True)
class CellRange:
    sheet: str | None
    min_col: int | None
    min_row: int | None
    max_col: int | None
    max_row: int | None

    def bounds(self, max_row: int, max_col: int) -> tuple[int, int, int, int]:
        r1 = self.min_row or 1
        c1 = self.min_col or 1
        r2 = self.max_row if self.max_row is not None else max(max_row, r1)
        c2 = self.max_col if self.max_col is not None else max(max_col, c1)
        return (r1, c1, r2, c2)

    def cells(self, max_row: int, max_col: int) -> list[tuple[int, int]]:
        r1, c1, r2, c2 = self.bounds(max_row, max_col)
        return [(r, c) for r in range(r1, r2 + 1) for c in range(c1, c2 + 1)]

    def ref(self) -> str:
        start = f"{(column_letters(self.min_col) if self.min_col else '')}{self.min_row or ''}"
        end = f"{(column_letters(self.max_col) if self.max_col else '')}{self.max_row or ''}"
        return start if start == end and self.min_col and self.min_row else f'{start}:{end}'

    def __str__(self) -> str:
        return f'{quote_sheet(self.sheet)}!{self.ref()}' if self.sheet is not None else self.ref()

def _endpoint(text: str, part: str) -> tuple[int | None, int | None]:
    m = _ENDPOINT.match(text)
    if not m or not (m.group(1) or m.group(2)):
        raise RangeError(f'{part!r} is not a cell range')
    col = column_index(m.group(1)) if m.group(1) else None
    row = int(m.group(2)) if m.group(2) else None
    if col is not None and col > MAX_COL or (row is not None and (not 1 <= row <= MAX_ROW)):
        raise RangeError(f'{part!r} lies outside the sheet')
    return (col, row)

def parse_ref(ref: str, sheet: str | None=None, part: str | None=None) -> CellRange:
    part = part or ref
    text = _SPACES.sub('', ref).replace('$', '').upper().strip("'")
    if not text:
        raise RangeError(f'{part!r} names no cells')
    start, _, end = text.partition(':')
    c1, r1 = _endpoint(start, part)
    c2, r2 = _endpoint(end, part) if end else (c1, r1)
    if not end and (c1 is None or r1 is None):
        raise RangeError(f'{part!r} is not a cell range')
    if c1 is not None and r1 is not None and (c2 is None):
        c2 = c1
    elif c1 is not None and r1 is not None and (r2 is None):
        return CellRange(sheet, min(c1, c2), r1, max(c1, c2), None)
    if (c1 is None) != (c2 is None) or (r1 is None) != (r2 is None):
        raise RangeError(f'{part!r} mixes a column range with a row range')
    cols = (min(c1, c2), max(c1, c2)) if c1 is not None and c2 is not None else (None, None)
    rows = (min(r1, r2), max(r1, r2)) if r1 is not None and r2 is not None else (None, None)
    return CellRange(sheet, cols[0], rows[0], cols[1], rows[1])

class Problem(Exception):
    pass

def arguments() -> dict[str, Any]:
    try:
        return json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    except json.JSONDecodeError as e:
        raise Problem(f'the arguments are not JSON: {e}') from None

def open_book(path: str, data_only: bool=False) -> Any:
    import openpyxl
    if not Path(path).is_file():
        raise Problem(f'{path}: no such file')
    try:
        return openpyxl.load_workbook(path, data_only=data_only)
    except Exception as e:
        raise Problem(f'{path} cannot be opened as an xlsx workbook: {type(e).__name__}: {e}') from None

def find_sheet(wb: Any, name: str) -> Any:
    if name in wb.sheetnames:
        return wb[name]
    folded = [s for s in wb.sheetnames if ' '.join(s.split()).casefold() == ' '.join(name.split()).casefold()]
    return wb[folded[0]] if len(folded) == 1 else None

def name(sheet: str, row: int, col: int) -> str:
    return f'{quote_sheet(sheet)}!{column_letters(col)}{row}'

def literal(cell: Any) -> bool:
    return cell is not None and cell.value not in (None, '') and (cell.data_type != 'f')

def run(main: Any) -> None:
    try:
        code = main()
    except Problem as e:
        print(e)
        code = 1
    sys.exit(code or 0)

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
        if rng.min_row != rng.max_row or rng.min_col != rng.max_col or rng.min_row is None:
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
