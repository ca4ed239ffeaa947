"""`answer_position` parsing, with the official evaluator's parser bugs fixed.

The official evaluator split on every comma and every `!`, stripped every quote and crashed on
column-only ranges. Real positions carry all of these: several ranges (`A1:A5, C1:C5`), quoted sheet
names with commas or quotes inside (`'b2b, sez, de'!A5:V10`, `'Bob''s'!A1`), column-only ranges
(`A:G`), a missing end column (`BD2:308`), `$` anchors, lower case and stray (also non-breaking) spaces.

Standard library only: the h* bank's tools embed this file (see bankgen.py), so it must run anywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_COL = 16384  # XFD
MAX_ROW = 1048576
_SPACES = re.compile(r"[\s\u00a0\u2007\u202f\ufeff]+")
_ENDPOINT = re.compile(r"^([A-Z]{0,3})([0-9]*)$")


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
    elif c1 is not None and r1 is not None and r2 is None:  # A2:C -> to the last used row
        return CellRange(sheet, min(c1, c2), r1, max(c1, c2), None)  # type: ignore[type-var]
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


def parse_answer_position(text: str) -> list[CellRange]:
    """All ranges of an answer_position, in order. A range without a sheet has `sheet=None`: the
    scorer reads it on the golden workbook's first sheet. Raises RangeError naming the bad part."""
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
