"""Workbook helpers shared by the bank's tools and checks (openpyxl; `formulas` or LibreOffice optional)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from unscaffold.benchmarks.spreadsheet.ranges import CellRange, column_letters, parse_answer_position, quote_sheet
from unscaffold.benchmarks.spreadsheet.values import ERROR_LITERALS, is_numeric_string, show

TASK_FILE = "/task/task.json"


class Problem(Exception):
    """A message for the user of the tool; the script prints it and exits 1."""


def arguments() -> dict[str, Any]:
    try:
        return json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    except json.JSONDecodeError as e:
        raise Problem(f"the arguments are not JSON: {e}") from None


def task_fields() -> dict[str, Any] | None:
    """The task's fields (inputs, outputs, answer_position), where the workspace provides them."""
    path = Path(TASK_FILE)
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, json.JSONDecodeError):
        return None


def open_book(path: str, data_only: bool = False) -> Any:
    import openpyxl

    if not Path(path).is_file():
        raise Problem(f"{path}: no such file")
    try:
        return openpyxl.load_workbook(path, data_only=data_only)
    except Exception as e:
        raise Problem(f"{path} cannot be opened as an xlsx workbook: {type(e).__name__}: {e}") from None


def find_sheet(wb: Any, name: str) -> Any:
    if name in wb.sheetnames:
        return wb[name]
    folded = [s for s in wb.sheetnames if " ".join(s.split()).casefold() == " ".join(name.split()).casefold()]
    return wb[folded[0]] if len(folded) == 1 else None


def answer_ranges(position: str, sheetnames: list[str]) -> list[CellRange]:
    """The ranges of an answer_position read against the workbook's sheets, as the scorer reads them;
    a range without a sheet is on the first one."""
    first_sheet = sheetnames[0]
    try:
        ranges = parse_answer_position(position, sheetnames)
    except ValueError as e:
        raise Problem(f"answer_position: {e}") from None
    return [CellRange(r.sheet if r.sheet is not None else first_sheet, r.min_col, r.min_row, r.max_col, r.max_row)
            for r in ranges]


def range_cells(rng: CellRange, *sheets: Any) -> list[tuple[int, int]]:
    """The cells of a range; open bounds end at the largest used size among the given sheets."""
    max_row = max([ws.max_row for ws in sheets if ws is not None] or [1])
    max_col = max([ws.max_column for ws in sheets if ws is not None] or [1])
    return rng.cells(max_row, max_col)


def name(sheet: str, row: int, col: int) -> str:
    return f"{quote_sheet(sheet)}!{column_letters(col)}{row}"


def literal(cell: Any) -> bool:
    """A typed-in value (not a formula, not empty): in an answer range, an example to keep."""
    return cell is not None and cell.value not in (None, "") and cell.data_type != "f"


def prefilled_changes(src: Any, out: Any, ranges: list[CellRange]) -> list[str]:
    """Literal input cells of the answer ranges whose value the output changed or cleared."""
    changes = []
    for rng in ranges:
        ws_in, ws_out = find_sheet(src, rng.sheet or ""), find_sheet(out, rng.sheet or "")
        if ws_in is None:
            continue
        for row, col in range_cells(rng, ws_in):
            before = ws_in.cell(row, col)
            if not literal(before):
                continue
            after = ws_out.cell(row, col).value if ws_out is not None else None
            if after != before.value:
                changes.append(f"{name(rng.sheet or '', row, col)} was {show(before.value)}, now {show(after)}")
    return changes


def has_formulas(wb: Any) -> bool:
    return any(c.data_type == "f" for ws in wb.worksheets for row in ws.iter_rows() for c in row)


def evaluate(path: str) -> dict[tuple[str, int, int], Any] | None:
    """Values of the formula cells, recalculated (LibreOffice if installed, else `formulas`); None if
    neither is available. Keys use the workbook's own sheet names."""
    values = _libreoffice(path)
    return values if values is not None else _formulas_engine(path)


def _libreoffice(path: str) -> dict[tuple[str, int, int], Any] | None:
    office = shutil.which("soffice") or shutil.which("libreoffice")
    if not office:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "book.xlsx"
        shutil.copyfile(path, src)
        try:
            subprocess.run([office, f"-env:UserInstallation=file://{tmp}/profile", "--headless", "--norestore",
                            "--convert-to", "xlsx", "--outdir", f"{tmp}/out", str(src)],
                           capture_output=True, timeout=120, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        if not (Path(tmp) / "out" / "book.xlsx").is_file():
            return None
        book = open_book(f"{tmp}/out/book.xlsx", data_only=True)
        formulas_at = open_book(path)
        return {(ws.title, c.row, c.column): book[ws.title].cell(c.row, c.column).value
                for ws in formulas_at.worksheets for row in ws.iter_rows() for c in row if c.data_type == "f"}


def _formulas_engine(path: str) -> dict[tuple[str, int, int], Any] | None:
    try:
        import formulas
    except ImportError:
        return None
    import re

    book = open_book(path)
    names = {ws.title.upper(): ws.title for ws in book.worksheets}
    with contextlib.redirect_stderr(io.StringIO()):
        solution = formulas.ExcelModel().loads(path).finish().calculate()
    out = {}
    for key, value in solution.items():
        m = re.match(r"^'?\[[^\]]*\](.*?)'?!([A-Z]+)([0-9]+)$", str(key))
        if m and m.group(1) in names:
            from openpyxl.utils import column_index_from_string

            v = getattr(value, "value", value)
            while hasattr(v, "shape") and getattr(v, "ndim", 0) > 0:
                v = v.flat[0] if v.size else None
            v = str(v) if isinstance(v, str) else (v.item() if hasattr(v, "item") else v)
            out[(names[m.group(1)], int(m.group(3)), column_index_from_string(m.group(2)))] = v
    return out


# The answer-range flags that fail a check; the others (NUMERIC_STRING, SAME_VALUE) are warnings.
FAILING = ("ALL_EMPTY", "FORMULA_STRING", "ERROR_LITERAL")


def range_flags(src: Any, out: Any, ranges: list[CellRange], computed: dict | None) -> list[str]:
    """The answer-range flags: ALL_EMPTY, FORMULA_STRING, ERROR_LITERAL, NUMERIC_STRING, SAME_VALUE."""
    flags, written = [], []
    filled = 0
    for rng in ranges:
        ws_out, ws_in = find_sheet(out, rng.sheet or ""), find_sheet(src, rng.sheet or "")
        if ws_out is None:
            flags.append(f"ALL_EMPTY: the output has no sheet {rng.sheet!r}")
            continue
        for row, col in range_cells(rng, ws_in, ws_out):
            cell, where = ws_out.cell(row, col), name(ws_out.title, row, col)
            value = cell.value
            if cell.data_type == "f" and computed is not None:
                value = computed.get((ws_out.title, row, col))
            if value in (None, ""):
                continue
            filled += 1
            if not literal(ws_in.cell(row, col) if ws_in is not None else None):
                written.append(value)
            if cell.data_type == "s" and str(value).lstrip().startswith("="):
                flags.append(f"FORMULA_STRING: {where} holds the text {show(value)}, not a formula")
            elif isinstance(value, str) and value.strip() in ERROR_LITERALS:
                flags.append(f"ERROR_LITERAL: {where} is {value.strip()}")
            elif is_numeric_string(value):
                flags.append(f"NUMERIC_STRING: {where} holds the number {show(value)} as text")
    if not filled:
        flags.insert(0, "ALL_EMPTY: every cell of answer_position is empty in the output")
    if len(written) >= 3 and len({show(v) for v in written}) == 1:
        flags.append(f"SAME_VALUE: all {len(written)} written cells hold {show(written[0])}")
    return flags


def run(main: Any) -> None:
    """Run a script's main; a Problem prints its message and exits 1."""
    try:
        code = main()
    except Problem as e:
        print(e)
        code = 1
    sys.exit(code or 0)
