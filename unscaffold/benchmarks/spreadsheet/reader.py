"""The cells of `answer_position` in one workbook, read in a child process (see unscaffold.bounded).

    python -I .../spreadsheet/reader.py read|formulas   (JSON requests in, one answer line each out)

`read` opens the workbook with openpyxl (cached values, as the official evaluator does) and returns
only the stored cells inside the answer ranges, never the rectangle a sheet's dimensions claim: a
workbook holding `A1` and `XFD1048576` costs two cells. With `uncached`, it also lists the formula
cells in the ranges that carry no cached value; with `foreign`, the cells in the ranges whose formula
names another workbook. A request `{"op": "links", ...}` lists what in a workbook refers to other
workbooks (external link parts, data connections, foreign-book references in any formula or defined
name), read before any engine sees the file, since an engine would load what they name. `formulas`
evaluates cells with the `formulas` engine and keeps only results of the workbook itself, never of a
book a formula names. Golden workbooks resolve the position against their own sheets; outputs get the
resolved ranges. Errors come back as {"error": kind, "message": ...}: `unreadable`, `position`,
`sheet`, `engine`.
Run as a script it imports ranges.py from beside it rather than through the package, whose imports
(pydantic, the sandbox) would triple each child's start-up; `read` also keeps numpy out of openpyxl.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ranges import RangeError, parse_answer_position
else:
    from .ranges import RangeError, parse_answer_position

Box = tuple[str, int | None, int | None, int | None, int | None]  # sheet, min_col, min_row, max_col, max_row
MAX_CELLS = 2_000_000
MAX_LINKS = 20  # references listed per workbook (one is enough to refuse it)
_STRING = re.compile(r'"(?:[^"]|"")*"')  # a string literal of a formula
# A reference into another workbook, outside string literals: `[1]Sheet!A1`, `[book.xlsx]Sheet!A1`,
# `[1]!Name`, `'../dir/[book.xlsx]My sheet'!A1` (a sheet name never holds a bracket), LibreOffice's
# `'file:///x.ods'#$Sheet1.A1`. Structured table references (`Table1[Col]`) are never followed by `!`.
_FOREIGN = re.compile(r"\][\w.]*!|'(?:[^']|'')*[\[\]](?:[^']|'')*'!|'(?:[^']|'')*'#\$|\bfile:", re.IGNORECASE)
_ADDRESS = re.compile(r"[$A-Za-z0-9_.:]*")
_INDIRECT = re.compile(r"\bINDIRECT\s*\(", re.IGNORECASE)
_FORMULA_TAGS = {"f", "formula", "formula1", "formula2", "definedName"}
# Parts whose formulas or relationships can name another file (relationships of external link parts
# are left to the parts themselves, which are listed whole).
_SCANNED = re.compile(r"^(?:xl/(?:worksheets|chartsheets|macrosheets|charts)/[^/]+\.xml"
                      r"|(?!xl/externallinks/)(?:.*/)?_rels/[^/]*\.rels)$")


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
    kinds: dict[str, type[dt.date] | type[dt.time]] = {"datetime": dt.datetime, "date": dt.date, "time": dt.time}
    return kinds[kind].fromisoformat(raw)


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


def foreign_reference(formula: str) -> str | None:
    """The first reference of `formula` into another workbook, or None. String literals count too when
    the formula has INDIRECT, which turns text into a reference."""
    bare = _STRING.sub('""', formula)
    texts = [bare]
    if _INDIRECT.search(bare):
        texts += [literal[1:-1].replace('""', '"') for literal in _STRING.findall(formula)]
    for text in texts:
        found = _FOREIGN.search(text)
        if found is not None:
            start = text.rfind("[", 0, found.start() + 1) if found.group().startswith("]") else found.start()
            address = _ADDRESS.match(text, found.end())  # `*`: it always matches, perhaps empty
            end = found.end() + (len(address.group()) if address else 0)
            return text[max(start, 0):end][:120]
    return None


def links(request: dict[str, Any]) -> dict[str, Any]:
    """What in the workbook at `path` refers to other workbooks, read from its XML parts."""
    import xml.etree.ElementTree as ET

    found: list[str] = []
    try:
        with zipfile.ZipFile(request["path"]) as archive:
            for info in archive.infolist():
                name = info.filename
                lower = name.lower()
                if lower.startswith("xl/externallinks/") and not lower.endswith(".rels"):
                    found.append(f"an external link part ({name})")
                elif lower == "xl/connections.xml":
                    found.append(f"data connections ({name})")
                elif lower == "xl/workbook.xml" or _SCANNED.match(lower):
                    found += _part_links(archive, name, ET)
                if len(found) >= MAX_LINKS:
                    break
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, RuntimeError, ValueError,
            NotImplementedError) as e:
        raise Failure("unreadable", f"cannot be read: {type(e).__name__}: {str(e)[:200]}") from None
    return {"links": found[:MAX_LINKS]}


def _part_links(archive: zipfile.ZipFile, name: str, ET: Any) -> list[str]:  # noqa: N803
    found: list[str] = []
    cell = ""
    try:
        with archive.open(name) as part:
            for event, element in ET.iterparse(part, events=("start", "end")):
                tag = element.tag.rsplit("}", 1)[-1]
                if event == "start":
                    if tag == "c":
                        cell = element.get("r", "")
                    continue
                if tag in _FORMULA_TAGS and element.text:
                    ref = foreign_reference(element.text)
                    if ref is not None:
                        where = f"{cell} of {name}" if tag == "f" else f"a {tag} of {name}"
                        found.append(f"{ref} in {where}")
                        if len(found) >= MAX_LINKS:
                            break
                elif tag == "externalReference":
                    found.append(f"an external reference of {name}")
                elif (tag == "Relationship" and element.get("TargetMode") == "External"
                      and not element.get("Type", "").endswith("/hyperlink")):
                    found.append(f"an external target {element.get('Target', '')[:120]!r} in {name}")
                if tag in ("c", "row", "definedName", "cfRule", "dataValidation"):
                    element.clear()
    except ET.ParseError as e:
        raise Failure("unreadable", f"cannot be read: {name} is not well-formed XML ({e})") from None
    return found


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
    boxes: list[Box] = ([tuple(b) for b in request["ranges"]] if request.get("ranges") is not None
                        else resolve(request["position"], sheetnames))
    cells = answer_cells(wb, boxes, lambda cell: cell.value is not None)
    sizes = {name: [wb[name].max_row, wb[name].max_column] for name in dict.fromkeys(b[0] for b in boxes)
             if name in sheetnames and hasattr(wb[name], "_cells")}
    answer: dict[str, Any] = {
        "sheetnames": sheetnames, "ranges": boxes, "sizes": sizes,
        "cells": {name: [[r, c, encode(v)] for r, c, v in found] for name, found in cells.items()},
    }
    if request.get("uncached") or request.get("foreign"):
        cached = {(name, r, c) for name, found in cells.items() for r, c, _ in found}
        formulas = answer_cells(load(request["path"], data_only=False), boxes, lambda cell: cell.data_type == "f")
        answer["uncached"] = [[name, r, c] for name, found in formulas.items() for r, c, _ in found
                              if (name, r, c) not in cached]
        if request.get("foreign"):
            answer["foreign"] = [[name, r, c, ref] for name, found in formulas.items() for r, c, text in found
                                 if (ref := foreign_reference(formula_text(text))) is not None]
    return answer


def formula_text(value: Any) -> str:
    """The text of a formula cell's value (array and data-table formulas are objects in openpyxl)."""
    return value if isinstance(value, str) else str(getattr(value, "text", None) or value)


def evaluate(request: dict[str, Any]) -> dict[str, Any]:
    """The engine's values of the requested formula cells."""
    import contextlib
    import io

    import formulas
    from openpyxl.styles.numbers import is_date_format
    from openpyxl.utils.cell import column_index_from_string
    from openpyxl.utils.datetime import from_excel

    wanted = {(s, r, c) for s, r, c in request["cells"]}
    by_key = {s.upper(): s for s, _, _ in wanted}
    own_book = Path(request["path"]).name.upper()
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
        m = re.match(r"^'?\[([^\]]*)\](.*?)'?!([A-Z]+)([0-9]+)$", str(key))
        if not m or m.group(1).upper() != own_book or m.group(2) not in by_key:
            continue  # a cell of another book a formula named is never taken for one of this workbook
        cell = (by_key[m.group(2)], int(m.group(4)), column_index_from_string(m.group(3)))
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
            request = json.loads(line)
            kind = "links" if request.get("op") == "links" else op
            answer = {"formulas": evaluate, "links": links}.get(kind, read)(request)
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
