"""What an evolved bank must never name for a spreadsheet task: its distinctive gold values and, for real
tasks, the coordinates of its answer cells.

A gold value counts when the student has to work it out (it is not already in the input workbook) and it
is distinctive enough that finding it in a bank means a copied answer: strings of 6+ characters, numbers
from 100 with decimals, dates. A coordinate counts when it is specific enough not to be ordinary text:
an answer range of 5+ characters (`D2:D20`, `'Sales'!B3`), whole or per part. Only the tasks asked for are
read, so evolution on the train split never opens a test task's workbooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from unscaffold.errors import InputError

from .ranges import RangeError, parse_answer_position

MIN_MARKER = 6  # shorter gold strings ("Open", "F") would match ordinary text in K
MIN_COORDINATE = 5  # "C2" or "A:A" would match ordinary text; "D2:D20" names one task's answer


def gold_marker(value: Any) -> str | None:
    """How a gold value would appear in text, if it is distinctive enough to flag."""
    if isinstance(value, str):
        return value if len(value.strip()) >= MIN_MARKER else None
    if isinstance(value, float) and value != int(value) and abs(value) >= 100:
        return f"{value:.2f}"  # 100.25 and longer: short decimals would match ordinary numbers in K
    if hasattr(value, "year"):
        return value.strftime("%Y-%m-%d")
    return None


def coordinate_markers(answer_position: str) -> set[str]:
    """The answer position as written and each of its ranges, with and without the sheet."""
    texts = {answer_position.strip(" \t\u00a0")}
    try:
        for r in parse_answer_position(answer_position):
            texts |= {r.ref(), str(r)}
    except RangeError:
        pass  # the position as written is still a marker
    return {t for t in texts if len(t) >= MIN_COORDINATE}


def _workbook_values(path: Path) -> Any:
    import openpyxl

    try:
        return openpyxl.load_workbook(path, data_only=True, read_only=False)
    except Exception as e:  # noqa: BLE001 - any unreadable workbook is one line naming the file
        raise InputError(str(path), None, f"cannot read the workbook for the leak guard: {e}") from None


def answer_value_markers(golden: Path, source: Path, answer_position: str) -> set[str]:
    """Distinctive values of the golden's answer cells that the input workbook does not already show."""
    gold_wb, input_wb = _workbook_values(golden), _workbook_values(source)
    visible = {gold_marker(c.value) for ws in input_wb.worksheets for row in ws.iter_rows() for c in row}
    try:
        ranges = parse_answer_position(answer_position, gold_wb.sheetnames)
    except RangeError:
        return set()
    markers = set()
    for r in ranges:
        if r.sheet is not None and r.sheet not in gold_wb.sheetnames:
            continue
        ws = gold_wb[r.sheet] if r.sheet is not None else gold_wb.worksheets[0]
        for row, col in r.cells(ws.max_row, ws.max_column):
            marker = gold_marker(ws.cell(row=row, column=col).value)
            if marker and marker not in visible:
                markers.add(marker)
    return markers
