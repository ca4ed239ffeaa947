# The helpers every check imports, rendered from the package's sources.
# ruff: noqa

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_COL = 16384

MAX_ROW = 1048576

_SPACES = re.compile('[\\s\\u00a0\\u2007\\u202f\\ufeff]+')

_ENDPOINT = re.compile('^([A-Z]{0,3})([0-9]*)$')

_OFFICIAL_CELL = re.compile('^\\$?([A-Za-z]{1,3})\\$?([0-9]+)$')

_OFFICIAL_CORNER = re.compile('^([A-Z]{1,3})([0-9]+)$')

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

def _split_top_level(text: str, separator: str) -> list[str]:
    parts, current, quoted, i = ([], [], False, 0)
    while i < len(text):
        ch = text[i]
        if ch == "'":
            if quoted and text[i + 1:i + 2] == "'":
                current.append("''")
                i += 2
                continue
            quoted = not quoted
        if ch == separator and (not quoted):
            parts.append(''.join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    if quoted:
        raise RangeError(f'unbalanced quote in {text!r}')
    parts.append(''.join(current))
    return parts

def _sheet_name(raw: str) -> str:
    raw = raw.strip(' \t\xa0')
    if len(raw) >= 2 and raw[0] == "'" and (raw[-1] == "'"):
        return raw[1:-1].replace("''", "'").replace('\xa0', ' ')
    return _SPACES.sub(' ', raw).strip()

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

def _parse_part(part: str) -> CellRange:
    pieces = _split_top_level(part, '!')
    if len(pieces) == 1:
        return parse_ref(pieces[0], None, part)
    sheet = _sheet_name('!'.join(pieces[:-1]))
    if not sheet:
        raise RangeError(f'{part!r} has an empty sheet name')
    return parse_ref(pieces[-1], sheet, part)

def _official_ref(ref: str, sheet: str | None) -> CellRange | None:
    if ':' not in ref:
        m = _OFFICIAL_CELL.match(ref)
        corners = [m, m] if m else []
    else:
        corners = [_OFFICIAL_CORNER.match(end) for end in ref.split(':')]
    if len(corners) != 2 or not all(corners):
        return None
    (c1, r1), (c2, r2) = [(column_index(m.group(1)), int(m.group(2))) for m in corners]
    if not (1 <= c1 <= c2 <= MAX_COL and 1 <= r1 <= r2 <= MAX_ROW):
        return None
    return CellRange(sheet, c1, r1, c2, r2)

def official_ranges(text: str) -> list[CellRange] | None:
    out = []
    for part in text.split(','):
        sheet: str | None = None
        ref = part
        if '!' in part:
            pieces = part.split('!')
            if len(pieces) != 2 or not pieces[0].strip("'"):
                return None
            sheet, ref = (pieces[0].strip("'"), pieces[1])
        rng = _official_ref(ref.strip("'"), sheet)
        if rng is None:
            return None
        out.append(rng)
    return out

def parse_answer_position(text: str, sheetnames: list[str] | None=None) -> list[CellRange]:
    official = official_ranges(text)
    if official is not None and (sheetnames is None or all((r.sheet is None or r.sheet in sheetnames for r in official))):
        return official
    try:
        return excel_ranges(text)
    except RangeError:
        if official is not None:
            return official
        raise

def excel_ranges(text: str) -> list[CellRange]:
    parts = [p for p in _split_top_level(text, ',') if p.strip(' \t\xa0')]
    if not parts:
        raise RangeError(f'{text!r} names no cells')
    out: list[CellRange] = []
    i = 0
    while i < len(parts):
        try:
            out.append(_parse_part(parts[i]))
            i += 1
            continue
        except RangeError as error:
            j = next((j for j in range(i + 1, len(parts)) if '!' in parts[j]), None)
            if j is None:
                raise error from None
            try:
                out.append(_parse_part(','.join(parts[i:j + 1])))
            except RangeError:
                raise error from None
            i = j + 1
    return out

EXCEL_EPOCH = dt.datetime(1899, 12, 30)

ERROR_LITERALS = ('#NULL!', '#DIV/0!', '#VALUE!', '#REF!', '#NAME?', '#NUM!', '#N/A', '#SPILL!', '#CALC!')

_NUMERIC = re.compile('^\\s*[+-]?(?:\\d+(?:\\.\\d*)?|\\.\\d+)(?:[eE][+-]?\\d+)?\\s*$')

def serial(value: dt.datetime | dt.date) -> float:
    if not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    delta = value - EXCEL_EPOCH
    return delta.days + delta.seconds / 86400.0

def is_numeric_string(value: Any) -> bool:
    return isinstance(value, str) and bool(_NUMERIC.match(value))

def normalize(value: Any) -> Any:
    if isinstance(value, bool):
        return round(float(value), 2)
    if isinstance(value, (int, float)):
        return round(float(value), 2)
    if isinstance(value, dt.time):
        return f'{value.hour:02d}:{value.minute:02d}'
    if isinstance(value, (dt.datetime, dt.date)):
        return float(round(serial(value), 0))
    if isinstance(value, dt.timedelta):
        return round(value.total_seconds() / 86400.0, 2)
    if is_numeric_string(value):
        return round(float(value), 2)
    return value

def same_value(expected: Any, actual: Any) -> bool:
    a, b = (normalize(expected), normalize(actual))
    if a in (None, '') and b in (None, ''):
        return True
    if type(a) is not type(b):
        return False
    return a == b

def show(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=' ').removesuffix(' 00:00:00')
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + '...'

TASK_FILE = '/task/task.json'

class Problem(Exception):
    pass

def arguments() -> dict[str, Any]:
    try:
        return json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    except json.JSONDecodeError as e:
        raise Problem(f'the arguments are not JSON: {e}') from None

def task_fields() -> dict[str, Any] | None:
    path = Path(TASK_FILE)
    try:
        return json.loads(path.read_text(encoding='utf-8')) if path.is_file() else None
    except (OSError, json.JSONDecodeError):
        return None

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

def answer_ranges(position: str, sheetnames: list[str]) -> list[CellRange]:
    first_sheet = sheetnames[0]
    try:
        ranges = parse_answer_position(position, sheetnames)
    except ValueError as e:
        raise Problem(f'answer_position: {e}') from None
    return [CellRange(r.sheet if r.sheet is not None else first_sheet, r.min_col, r.min_row, r.max_col, r.max_row) for r in ranges]

def range_cells(rng: CellRange, *sheets: Any) -> list[tuple[int, int]]:
    max_row = max([ws.max_row for ws in sheets if ws is not None] or [1])
    max_col = max([ws.max_column for ws in sheets if ws is not None] or [1])
    return rng.cells(max_row, max_col)

def name(sheet: str, row: int, col: int) -> str:
    return f'{quote_sheet(sheet)}!{column_letters(col)}{row}'

def literal(cell: Any) -> bool:
    return cell is not None and cell.value not in (None, '') and (cell.data_type != 'f')

def prefilled_changes(src: Any, out: Any, ranges: list[CellRange]) -> list[str]:
    changes = []
    for rng in ranges:
        ws_in, ws_out = (find_sheet(src, rng.sheet or ''), find_sheet(out, rng.sheet or ''))
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
    return any((c.data_type == 'f' for ws in wb.worksheets for row in ws.iter_rows() for c in row))

def evaluate(path: str) -> dict[tuple[str, int, int], Any] | None:
    values = _libreoffice(path)
    return values if values is not None else _formulas_engine(path)

def _libreoffice(path: str) -> dict[tuple[str, int, int], Any] | None:
    office = shutil.which('soffice') or shutil.which('libreoffice')
    if not office:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / 'book.xlsx'
        shutil.copyfile(path, src)
        try:
            subprocess.run([office, f'-env:UserInstallation=file://{tmp}/profile', '--headless', '--norestore', '--convert-to', 'xlsx', '--outdir', f'{tmp}/out', str(src)], capture_output=True, timeout=120, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        if not (Path(tmp) / 'out' / 'book.xlsx').is_file():
            return None
        book = open_book(f'{tmp}/out/book.xlsx', data_only=True)
        formulas_at = open_book(path)
        return {(ws.title, c.row, c.column): book[ws.title].cell(c.row, c.column).value for ws in formulas_at.worksheets for row in ws.iter_rows() for c in row if c.data_type == 'f'}

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
        m = re.match("^'?\\[[^\\]]*\\](.*?)'?!([A-Z]+)([0-9]+)$", str(key))
        if m and m.group(1) in names:
            from openpyxl.utils import column_index_from_string
            v = getattr(value, 'value', value)
            while hasattr(v, 'shape') and getattr(v, 'ndim', 0) > 0:
                v = v.flat[0] if v.size else None
            v = str(v) if isinstance(v, str) else v.item() if hasattr(v, 'item') else v
            out[names[m.group(1)], int(m.group(3)), column_index_from_string(m.group(2))] = v
    return out

def range_flags(src: Any, out: Any, ranges: list[CellRange], computed: dict | None) -> list[str]:
    flags, written = ([], [])
    filled = 0
    for rng in ranges:
        ws_out, ws_in = (find_sheet(out, rng.sheet or ''), find_sheet(src, rng.sheet or ''))
        if ws_out is None:
            flags.append(f'ALL_EMPTY: the output has no sheet {rng.sheet!r}')
            continue
        for row, col in range_cells(rng, ws_in, ws_out):
            cell, where = (ws_out.cell(row, col), name(ws_out.title, row, col))
            value = cell.value
            if cell.data_type == 'f' and computed is not None:
                value = computed.get((ws_out.title, row, col))
            if value in (None, ''):
                continue
            filled += 1
            if not literal(ws_in.cell(row, col) if ws_in is not None else None):
                written.append(value)
            if cell.data_type == 's' and str(value).lstrip().startswith('='):
                flags.append(f'FORMULA_STRING: {where} holds the text {show(value)}, not a formula')
            elif isinstance(value, str) and value.strip() in ERROR_LITERALS:
                flags.append(f'ERROR_LITERAL: {where} is {value.strip()}')
            elif is_numeric_string(value):
                flags.append(f'NUMERIC_STRING: {where} holds the number {show(value)} as text')
    if not filled:
        flags.insert(0, 'ALL_EMPTY: every cell of answer_position is empty in the output')
    if len(written) >= 3 and len({show(v) for v in written}) == 1:
        flags.append(f'SAME_VALUE: all {len(written)} written cells hold {show(written[0])}')
    return flags

def run(main: Any) -> None:
    try:
        code = main()
    except Problem as e:
        print(e)
        code = 1
    sys.exit(code or 0)

WARNED = Path('/tmp/.spreadsheet-checks-warned')

def pairs() -> tuple[dict[str, Any], list[tuple[str, str]]]:
    fields = task_fields() or {}
    return (fields, list(zip(fields.get('inputs', []), fields.get('outputs', []), strict=False)))

def first_time(message: str) -> bool:
    digest = hashlib.sha256(message.encode()).hexdigest()[:16]
    seen = WARNED.read_text().split() if WARNED.is_file() else []
    if digest in seen:
        return False
    try:
        WARNED.write_text('\n'.join([*seen, digest]) + '\n')
    except OSError:
        return False
    return True
