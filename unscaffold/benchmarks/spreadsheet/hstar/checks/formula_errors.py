"""Before finishing: formulas in the output recalculate without error values (#DIV/0!, #NAME?, #REF!, ...)."""

# Self-contained script: the helpers it needs are included below.
# ruff: noqa

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

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

ERROR_LITERALS = ('#NULL!', '#DIV/0!', '#VALUE!', '#REF!', '#NAME?', '#NUM!', '#N/A', '#SPILL!', '#CALC!')

TASK_FILE = '/task/task.json'

class Problem(Exception):
    pass

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

def name(sheet: str, row: int, col: int) -> str:
    return f'{quote_sheet(sheet)}!{column_letters(col)}{row}'

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

def run(main: Any) -> None:
    try:
        code = main()
    except Problem as e:
        print(e)
        code = 1
    sys.exit(code or 0)

def pairs() -> tuple[dict[str, Any], list[tuple[str, str]]]:
    fields = task_fields() or {}
    return (fields, list(zip(fields.get('inputs', []), fields.get('outputs', []), strict=False)))

def main() -> int:
    _, files = pairs()
    for _, target in files:
        if not Path(target).is_file():
            continue
        try:
            if not has_formulas(open_book(target)):
                continue
        except Problem:
            continue
        computed = evaluate(target) or {}
        errors = [f"{name(s, r, c)} = {v}" for (s, r, c), v in computed.items()
                  if isinstance(v, str) and v.strip() in ERROR_LITERALS]
        if errors:
            print(f"{target}: {len(errors)} formula(s) evaluate to an error: " + "; ".join(errors[:10]))
            return 1
    return 0


if __name__ == "__main__":
    run(main)
