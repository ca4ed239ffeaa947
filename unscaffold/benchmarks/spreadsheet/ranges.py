"""`answer_position` parsing: the official evaluator's reading wherever it reads the cells meant.

The official `compare_workbooks` splits on every comma, splits each part on `!`, strips every leading
and trailing quote from the sheet name and from the range, and takes a part without `!` from the
golden's first sheet. That reading is kept exactly wherever it names real cells on sheets the golden
workbook has, quirks included: `'Sheet1!'A2:B19`, `Updated Data'!B5:B9`, `'Sub CO's'!B4:B11` and
`'99250!A1:F9'` all read as written there. Where it crashes or reads cells the text does not mean (a
sheet name holding a comma or a doubled quote, `A:G`, `BD2:308`, `$` or lower case in a range, stray
spaces, reversed corners), the position is read as Excel would, and an output is judged on those cells.

Standard library only: the h* bank's tools embed this file (see bankgen.py), so it must run anywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_COL = 16384  # XFD
MAX_ROW = 1048576
_SPACES = re.compile(r"[\s\u00a0\u2007\u202f\ufeff]+")
_ENDPOINT = re.compile(r"^([A-Z]{0,3})([0-9]*)$")
_OFFICIAL_CELL = re.compile(r"^\$?([A-Za-z]{1,3})\$?([0-9]+)$")  # a lone cell, as openpyxl's ws[name] reads it
_OFFICIAL_CORNER = re.compile(r"^([A-Z]{1,3})([0-9]+)$")  # corners its range splitter reads as Excel does


class RangeError(ValueError):
    """An answer_position part that names no cells."""


def column_index(letters: str) -> int:
    """`A` -> 1, `AB` -> 28."""
    n = 0
    for ch in letters.upper():
        n = n * 26 + ord(ch) - 64
    return n


def column_letters(index: int) -> str:
    """1 -> `A`, 28 -> `AB`."""
    out = ""
    while index > 0:
        index, rest = divmod(index - 1, 26)
        out = chr(65 + rest) + out
    return out


def quote_sheet(name: str) -> str:
    """The sheet prefix as Excel writes it: quoted (quotes doubled) unless the name is a plain word."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name):
        return name
    return "'" + name.replace("'", "''") + "'"


@dataclass(frozen=True)
class CellRange:
    """A box of cells; None bounds are open (a column-only range has no rows) and resolve per sheet."""

    sheet: str | None
    min_col: int | None
    min_row: int | None
    max_col: int | None
    max_row: int | None

    def bounds(self, max_row: int, max_col: int) -> tuple[int, int, int, int]:
        """(min_row, min_col, max_row, max_col) with open bounds closed by the sheet's used size."""
        r1 = self.min_row or 1
        c1 = self.min_col or 1
        r2 = self.max_row if self.max_row is not None else max(max_row, r1)
        c2 = self.max_col if self.max_col is not None else max(max_col, c1)
        return r1, c1, r2, c2

    def cells(self, max_row: int, max_col: int) -> list[tuple[int, int]]:
        """(row, column) pairs, row by row."""
        r1, c1, r2, c2 = self.bounds(max_row, max_col)
        return [(r, c) for r in range(r1, r2 + 1) for c in range(c1, c2 + 1)]

    def ref(self) -> str:
        """The range without its sheet: `A1:B5`, `A:C` or `2:4`."""
        start = f"{column_letters(self.min_col) if self.min_col else ''}{self.min_row or ''}"
        end = f"{column_letters(self.max_col) if self.max_col else ''}{self.max_row or ''}"
        return start if start == end and self.min_col and self.min_row else f"{start}:{end}"

    def __str__(self) -> str:
        return f"{quote_sheet(self.sheet)}!{self.ref()}" if self.sheet is not None else self.ref()


def _split_top_level(text: str, separator: str) -> list[str]:
    """Split on `separator` outside single-quoted sheet names (`''` inside quotes is a quote)."""
    parts, current, quoted, i = [], [], False, 0
    while i < len(text):
        ch = text[i]
        if ch == "'":
            if quoted and text[i + 1 : i + 2] == "'":
                current.append("''")
                i += 2
                continue
            quoted = not quoted
        if ch == separator and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    if quoted:
        raise RangeError(f"unbalanced quote in {text!r}")
    parts.append("".join(current))
    return parts


def _sheet_name(raw: str) -> str:
    raw = raw.strip(" \t\u00a0")
    if len(raw) >= 2 and raw[0] == "'" and raw[-1] == "'":
        return raw[1:-1].replace("''", "'").replace("\u00a0", " ")
    return _SPACES.sub(" ", raw).strip()


def _endpoint(text: str, part: str) -> tuple[int | None, int | None]:
    m = _ENDPOINT.match(text)
    if not m or not (m.group(1) or m.group(2)):
        raise RangeError(f"{part!r} is not a cell range")
    col = column_index(m.group(1)) if m.group(1) else None
    row = int(m.group(2)) if m.group(2) else None
    if (col is not None and col > MAX_COL) or (row is not None and not 1 <= row <= MAX_ROW):
        raise RangeError(f"{part!r} lies outside the sheet")
    return col, row


def parse_ref(ref: str, sheet: str | None = None, part: str | None = None) -> CellRange:
    """`A1`, `A1:B5`, `A:C`, `2:4`, `BD2:308` (end column = start column) or `A2:C` (rows open below)."""
    part = part or ref
    text = _SPACES.sub("", ref).replace("$", "").upper().strip("'")
    if not text:
        raise RangeError(f"{part!r} names no cells")
    start, _, end = text.partition(":")
    c1, r1 = _endpoint(start, part)
    c2, r2 = _endpoint(end, part) if end else (c1, r1)
    if not end and (c1 is None or r1 is None):
        raise RangeError(f"{part!r} is not a cell range")
    if c1 is not None and r1 is not None and c2 is None:  # BD2:308
        c2 = c1
    elif c1 is not None and r1 is not None and c2 is not None and r2 is None:  # A2:C -> to the last used row
        return CellRange(sheet, min(c1, c2), r1, max(c1, c2), None)
    if (c1 is None) != (c2 is None) or (r1 is None) != (r2 is None):
        raise RangeError(f"{part!r} mixes a column range with a row range")
    cols = (min(c1, c2), max(c1, c2)) if c1 is not None and c2 is not None else (None, None)
    rows = (min(r1, r2), max(r1, r2)) if r1 is not None and r2 is not None else (None, None)
    return CellRange(sheet, cols[0], rows[0], cols[1], rows[1])


def _parse_part(part: str) -> CellRange:
    pieces = _split_top_level(part, "!")
    if len(pieces) == 1:
        return parse_ref(pieces[0], None, part)
    sheet = _sheet_name("!".join(pieces[:-1]))
    if not sheet:
        raise RangeError(f"{part!r} has an empty sheet name")
    return parse_ref(pieces[-1], sheet, part)


def _official_ref(ref: str, sheet: str | None) -> CellRange | None:
    if ":" not in ref:
        m = _OFFICIAL_CELL.match(ref)
        corners: list[re.Match[str] | None] = [m, m] if m else []
    else:
        corners = [_OFFICIAL_CORNER.match(end) for end in ref.split(":")]
    matched = [m for m in corners if m is not None]
    if len(corners) != 2 or len(matched) != 2:
        return None
    (c1, r1), (c2, r2) = [(column_index(m.group(1)), int(m.group(2))) for m in matched]
    if not (1 <= c1 <= c2 <= MAX_COL and 1 <= r1 <= r2 <= MAX_ROW):
        return None  # the official loop reads no cell here (a vacuous pass) or one off the sheet
    return CellRange(sheet, c1, r1, c2, r2)


def official_ranges(text: str) -> list[CellRange] | None:
    """The ranges exactly as the official evaluator reads them, or None where that reading raises or
    names cells the text does not mean (see the module docstring)."""
    out = []
    for part in text.split(","):
        sheet: str | None = None
        ref = part
        if "!" in part:
            pieces = part.split("!")
            if len(pieces) != 2 or not pieces[0].strip("'"):
                return None
            sheet, ref = pieces[0].strip("'"), pieces[1]
        rng = _official_ref(ref.strip("'"), sheet)
        if rng is None:
            return None
        out.append(rng)
    return out


def parse_answer_position(text: str, sheetnames: list[str] | None = None) -> list[CellRange]:
    """All ranges of an answer_position, in order. A range without a sheet has `sheet=None`: the
    scorer reads it on the golden workbook's first sheet. With the golden's `sheetnames`, the official
    reading is taken only where every sheet it names exists there verbatim, as the official code needs.
    Raises RangeError naming the bad part."""
    official = official_ranges(text)
    if official is not None and (sheetnames is None or all(r.sheet is None or r.sheet in sheetnames
                                                             for r in official)):
        return official
    try:
        return excel_ranges(text)
    except RangeError:
        if official is not None:  # e.g. a sheet only matched ignoring case: the scorer says which
            return official
        raise


def excel_ranges(text: str) -> list[CellRange]:
    """The ranges as Excel reads them: quoted names may hold commas and doubled quotes."""
    parts = [p for p in _split_top_level(text, ",") if p.strip(" \t\u00a0")]
    if not parts:
        raise RangeError(f"{text!r} names no cells")
    out: list[CellRange] = []
    i = 0
    while i < len(parts):
        try:
            out.append(_parse_part(parts[i]))
            i += 1
            continue
        except RangeError as error:
            # An unquoted sheet name with commas (`b2b, sez, de!A5`): join up to the part with the `!`.
            j = next((j for j in range(i + 1, len(parts)) if "!" in parts[j]), None)
            if j is None:
                raise error from None
            try:
                out.append(_parse_part(",".join(parts[i : j + 1])))
            except RangeError:
                raise error from None
            i = j + 1
    return out
