"""The cells of `answer_position` in one workbook, read in a child process (see unscaffold.bounded).

    python -I .../spreadsheet/reader.py read|formulas   (JSON requests in, one answer line each out)

`read` opens the workbook with openpyxl (cached values, as the official evaluator does) and returns
only the stored cells inside the answer ranges, never the rectangle a sheet's dimensions claim: a
workbook holding `A1` and `XFD1048576` costs two cells. With `uncached`, it also lists the formula
cells in the ranges that carry no cached value. `formulas` evaluates those cells with the `formulas`
engine. Golden workbooks resolve the position against their own sheets; outputs get the resolved ranges.
Errors come back as {"error": kind, "message": ...}: `unreadable`, `position`, `sheet`, `engine`.
Run as a script it imports ranges.py from beside it rather than through the package, whose imports
(pydantic, the sandbox) would triple each child's start-up; `read` also keeps numpy out of openpyxl.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ranges import RangeError, parse_answer_position  # type: ignore[import-not-found]
else:
    from unscaffold.benchmarks.spreadsheet.ranges import RangeError, parse_answer_position

Box = tuple[str, int | None, int | None, int | None, int | None]  # sheet, min_col, min_row, max_col, max_row
MAX_CELLS = 2_000_000


class Failure(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def encode(value: Any) -> Any:
    """A JSON form of a cell value that `decode` turns back into the same Python value."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dt.datetime):
        return {"datetime": value.isoformat()}
    if isinstance(value, dt.date):
        return {"date": value.isoformat()}
    if isinstance(value, dt.time):
        return {"time": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {"timedelta": value.total_seconds()}
    return str(value)


def decode(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    (kind, raw), = value.items()
    if kind == "timedelta":
        return dt.timedelta(seconds=raw)
    return {"datetime": dt.datetime, "date": dt.date, "time": dt.time}[kind].fromisoformat(raw)


def sheet_key(name: str) -> str:
    """Sheet names as Excel compares them: case and repeated or non-breaking spaces ignored."""
    return " ".join(name.replace("\u00a0", " ").split()).casefold()


def resolve(position: str, sheetnames: list[str]) -> list[Box]:
    """The position's ranges on this (golden) workbook's actual sheets."""
    try:
        ranges = parse_answer_position(position, sheetnames)
    except RangeError as e:
        raise Failure("position", f"answer_position {position!r} cannot be parsed: {e}") from None
    boxes = []
    for r in ranges:
        name = r.sheet if r.sheet is not None else sheetnames[0]
        if name not in sheetnames:
            folded = [s for s in sheetnames if sheet_key(s) == sheet_key(name)]
            if len(folded) != 1:
                raise Failure("sheet", f"sheet {name!r} of answer_position is not in the golden workbook "
                                       f"(it has {sheetnames})")
            name = folded[0]
        boxes.append((name, r.min_col, r.min_row, r.max_col, r.max_row))
    return boxes


def inside(box: Box, row: int, col: int) -> bool:
    _, c1, r1, c2, r2 = box
    return ((c1 is None or c1 <= col <= c2) and (r1 is None or r1 <= row <= r2))  # type: ignore[operator]


def answer_cells(wb: Any, boxes: list[Box], keep: Any) -> dict[str, list[tuple[int, int, Any]]]:
    """(row, column, value) of the stored cells of each sheet that lie in a box and pass `keep`."""
    out: dict[str, list[tuple[int, int, Any]]] = {}
    for name in dict.fromkeys(b[0] for b in boxes):
        if name not in wb.sheetnames or not hasattr(wb[name], "_cells"):
            continue
        mine = [b for b in boxes if b[0] == name]
        found = out.setdefault(name, [])
        # the stored cells only (openpyxl keeps them in a dict): never iterate the claimed dimensions
        for (row, col), cell in wb[name]._cells.items():
            if keep(cell) and any(inside(b, row, col) for b in mine):
                found.append((row, col, cell.value))
                if len(found) > MAX_CELLS:
                    raise Failure("unreadable", f"more than {MAX_CELLS} stored cells in the answer ranges")
    return out


def load(path: str, data_only: bool) -> Any:
    import openpyxl

    try:
        return openpyxl.load_workbook(path, data_only=data_only)
    except MemoryError:
        raise
    except Exception as e:  # openpyxl raises many kinds on damaged files
        raise Failure("unreadable", f"cannot be read: {type(e).__name__}: {str(e)[:200]}") from None


def read(request: dict[str, Any]) -> dict[str, Any]:
    wb = load(request["path"], data_only=True)
    sheetnames = list(wb.sheetnames)
    boxes: list[Box] = ([tuple(b) for b in request["ranges"]] if request.get("ranges") is not None  # type: ignore[misc]
                        else resolve(request["position"], sheetnames))
    cells = answer_cells(wb, boxes, lambda cell: cell.value is not None)
    sizes = {name: [wb[name].max_row, wb[name].max_column] for name in dict.fromkeys(b[0] for b in boxes)
             if name in sheetnames and hasattr(wb[name], "_cells")}
    answer: dict[str, Any] = {
        "sheetnames": sheetnames, "ranges": boxes, "sizes": sizes,
        "cells": {name: [[r, c, encode(v)] for r, c, v in found] for name, found in cells.items()},
    }
    if request.get("uncached"):
        cached = {(name, r, c) for name, found in cells.items() for r, c, _ in found}
        formulas = answer_cells(load(request["path"], data_only=False), boxes, lambda cell: cell.data_type == "f")
        answer["uncached"] = [[name, r, c] for name, found in formulas.items() for r, c, _ in found
                              if (name, r, c) not in cached]
    return answer


def evaluate(request: dict[str, Any]) -> dict[str, Any]:
    """The engine's values of the requested formula cells."""
    import contextlib
    import io
    import re

    import formulas
    from openpyxl.styles.numbers import is_date_format
    from openpyxl.utils.cell import column_index_from_string
    from openpyxl.utils.datetime import from_excel

    wanted = {(s, r, c) for s, r, c in request["cells"]}
    by_key = {s.upper(): s for s, _, _ in wanted}
    wb = load(request["path"], data_only=False)
    dated = {(s, r, c) for s, r, c in wanted if is_date_format(wb[s].cell(r, c).number_format)}
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            solution = formulas.ExcelModel().loads(request["path"]).finish().calculate()
    except MemoryError:
        raise
    except Exception as e:
        raise Failure("engine", f"{type(e).__name__}: {str(e)[:200]}") from None
    values = []
    for key, result in solution.items():
        m = re.match(r"^'?\[[^\]]*\](.*?)'?!([A-Z]+)([0-9]+)$", str(key))
        if not m or m.group(1) not in by_key:
            continue
        cell = (by_key[m.group(1)], int(m.group(3)), column_index_from_string(m.group(2)))
        if cell in wanted:
            value = plain(getattr(result, "value", result))
            if cell in dated and isinstance(value, (int, float)) and not isinstance(value, bool):
                with contextlib.suppress(ValueError, OverflowError):
                    value = from_excel(value)  # a computed date shows as one where the cell is formatted so
            values.append([*cell, encode(value)])
    return {"values": values}


def plain(value: Any) -> Any:
    """A Python scalar from the engine's result (a 1x1 array, numpy types, error objects)."""
    while hasattr(value, "shape") and getattr(value, "ndim", 0) > 0:
        value = value.flat[0] if value.size else None
    if isinstance(value, str):  # error values are a str subclass
        return str(value)
    if hasattr(value, "item"):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float, str, dt.datetime)):
        return value
    text = str(value)
    return None if text in ("", "empty", "EMPTY") else text


def main() -> None:
    """Serve one request per stdin line, one answer per stdout line, until stdin closes."""
    op = sys.argv[1]
    if op == "read":
        sys.modules.setdefault("numpy", None)  # type: ignore[arg-type]  # openpyxl reads fine without it
    for line in sys.stdin:
        try:
            answer = (evaluate if op == "formulas" else read)(json.loads(line))
        except Failure as e:
            answer = {"error": e.kind, "message": str(e)}
        except MemoryError:
            answer = {"error": "memory", "message": "out of memory"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
        if answer.get("error") == "memory":
            return  # a fresh process for the next request


if __name__ == "__main__":
    main()
