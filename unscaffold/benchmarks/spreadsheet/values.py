"""Cell value comparison as the official SpreadsheetBench evaluator does it.

Numbers and numeric strings are rounded to 2 places, datetimes become Excel serial numbers (whole
days, as the official code rounds them), times become `HH:MM`, `""` equals an empty cell, and values
of different types never match. Fixed beyond the official code: `datetime.date` and `timedelta` values,
and strings such as `nan`, `inf` or `1_000` that Python's float() accepts but a spreadsheet would not.

Standard library only: the h* bank's tools embed this file (see bankgen.py).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

EXCEL_EPOCH = dt.datetime(1899, 12, 30)
ERROR_LITERALS = ("#NULL!", "#DIV/0!", "#VALUE!", "#REF!", "#NAME?", "#NUM!", "#N/A", "#SPILL!", "#CALC!")
_NUMERIC = re.compile(r"^\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*$")


def serial(value: dt.datetime | dt.date) -> float:
    """Excel's serial number of a date or datetime (days since 1899-12-30)."""
    if not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    delta = value - EXCEL_EPOCH
    return delta.days + delta.seconds / 86400.0


def is_numeric_string(value: Any) -> bool:
    return isinstance(value, str) and bool(_NUMERIC.match(value))


def normalize(value: Any) -> Any:
    """The comparable form of a cell value (see the module docstring)."""
    if isinstance(value, bool):
        return round(float(value), 2)
    if isinstance(value, (int, float)):
        return round(float(value), 2)
    if isinstance(value, dt.time):
        return f"{value.hour:02d}:{value.minute:02d}"
    if isinstance(value, (dt.datetime, dt.date)):
        return float(round(serial(value), 0))
    if isinstance(value, dt.timedelta):
        return round(value.total_seconds() / 86400.0, 2)
    if is_numeric_string(value):
        return round(float(value), 2)
    return value


def same_value(expected: Any, actual: Any) -> bool:
    """True when two cells match under the official rules."""
    a, b = normalize(expected), normalize(actual)
    if a in (None, "") and b in (None, ""):
        return True
    if type(a) is not type(b):
        return False
    return a == b


def show(value: Any) -> str:
    """A short, unambiguous rendering for reasons and tool output."""
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ").removesuffix(" 00:00:00")
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
