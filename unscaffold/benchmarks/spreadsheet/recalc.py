"""Cell values of a workbook as a spreadsheet application shows them: formulas recalculated.

openpyxl never evaluates formulas, and a workbook written by openpyxl has no cached values, so the
official evaluator opens every file in a spreadsheet application first. Here that is LibreOffice
headless where it is installed (as the official Linux port does), otherwise the `formulas` Python
engine. Every result says which engine produced it; a workbook without formulas needs none.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

EngineChoice = Literal["auto", "libreoffice", "formulas"]
ENGINE_ENV = "UNSCAFFOLD_SPREADSHEET_ENGINE"
LIBREOFFICE_TIMEOUT_S = 120.0
_FORMULAS_LOCK = threading.Lock()  # the formulas engine keeps module state; one workbook at a time
_PROFILES: dict[int, Path] = {}
_PROFILE_ROOT: list[Path] = []
_PROFILE_LOCK = threading.Lock()


class WorkbookError(Exception):
    """The file is missing, is not an xlsx workbook, or cannot be read; `path` says which file."""

    def __init__(self, message: str, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


@dataclass
class SheetValues:
    name: str
    cells: dict[tuple[int, int], Any]
    max_row: int
    max_col: int

    def value(self, row: int, col: int) -> Any:
        return self.cells.get((row, col))


@dataclass
class WorkbookValues:
    sheets: list[SheetValues]
    engine: str = "none"  # libreoffice, formulas, or none (no formulas to compute)
    notes: list[str] = field(default_factory=list)

    @property
    def sheetnames(self) -> list[str]:
        return [s.name for s in self.sheets]

    def sheet(self, name: str) -> SheetValues | None:
        """By exact name, else by name ignoring case and surrounding or repeated spaces (as Excel does)."""
        for s in self.sheets:
            if s.name == name:
                return s
        key = _sheet_key(name)
        matches = [s for s in self.sheets if _sheet_key(s.name) == key]
        return matches[0] if len(matches) == 1 else None


def _sheet_key(name: str) -> str:
    return " ".join(name.replace("\u00a0", " ").split()).casefold()


def libreoffice() -> str | None:
    """The LibreOffice binary, if installed."""
    return shutil.which("soffice") or shutil.which("libreoffice")


def chosen_engine(engine: EngineChoice | None = None) -> EngineChoice:
    """The explicit choice, else $UNSCAFFOLD_SPREADSHEET_ENGINE, else auto."""
    choice = engine or os.environ.get(ENGINE_ENV) or "auto"
    if choice not in ("auto", "libreoffice", "formulas"):
        raise ValueError(f"${ENGINE_ENV}: unknown engine {choice!r}; use auto, libreoffice or formulas")
    return choice  # type: ignore[return-value]


def open_workbook(path: Path, data_only: bool) -> Any:
    """openpyxl's workbook, with every failure turned into a WorkbookError that says what is wrong."""
    import openpyxl

    path = Path(path)
    if not path.is_file():
        raise WorkbookError(f"{path.name} does not exist", path)
    try:
        return openpyxl.load_workbook(path, data_only=data_only)
    except zipfile.BadZipFile:
        raise WorkbookError(f"{path.name} is not an xlsx workbook (not a zip archive)", path) from None
    except Exception as e:  # openpyxl raises many kinds on damaged files
        raise WorkbookError(f"{path.name} cannot be read: {type(e).__name__}: {e}", path) from None


def formula_cells(wb: Any) -> list[tuple[str, int, int]]:
    """(sheet, row, column) of every formula cell."""
    out = []
    for ws in wb.worksheets:
        for row in ws.iter_rows():
            for cell in row:
                if cell.data_type == "f":
                    out.append((ws.title, cell.row, cell.column))
    return out


def _sheet_values(wb: Any, computed: dict[tuple[str, int, int], Any] | None = None) -> list[SheetValues]:
    """Cell values per sheet; `computed` replaces formula cells (as a date where the cell is formatted as one)."""
    from openpyxl.styles.numbers import is_date_format

    sheets = []
    for ws in wb.worksheets:
        cells: dict[tuple[int, int], Any] = {}
        for row in ws.iter_rows():
            for cell in row:
                value = cell.value
                if computed is not None and cell.data_type == "f":
                    value = computed.get((ws.title, cell.row, cell.column))
                    if isinstance(value, (int, float)) and not isinstance(value, bool) \
                            and is_date_format(cell.number_format):
                        value = _from_serial(value)
                if value is not None:
                    cells[(cell.row, cell.column)] = value
        sheets.append(SheetValues(ws.title, cells, ws.max_row, ws.max_column))
    return sheets


def _from_serial(value: float) -> dt.datetime | float:
    try:
        from openpyxl.utils.datetime import from_excel

        return from_excel(value)
    except (ValueError, OverflowError):
        return value


def load_values(path: Path, *, engine: EngineChoice | None = None, prefer_cached: bool = False) -> WorkbookValues:
    """Values of every cell, formulas recalculated. `prefer_cached` keeps a value the file already
    caches (the reference workbook saved by Excel) when only the Python engine is available, since that
    engine lacks some Excel functions. Raises WorkbookError for a missing or unreadable file."""
    return load_many([Path(path)], engine=engine, prefer_cached=[prefer_cached])[0]


def load_many(paths: list[Path], *, engine: EngineChoice | None = None, prefer_cached: list[bool] | None = None
              ) -> list[WorkbookValues]:
    """As load_values for several files (`prefer_cached` per file), with one LibreOffice start for all."""
    choice = chosen_engine(engine)
    prefer = prefer_cached or [False] * len(paths)
    books = [open_workbook(p, data_only=False) for p in paths]
    needs = [i for i, wb in enumerate(books) if formula_cells(wb)]
    results: list[WorkbookValues | None] = [None] * len(paths)
    for i, wb in enumerate(books):
        if i not in needs:
            results[i] = WorkbookValues(_sheet_values(wb), engine="none")
    office = libreoffice()
    notes: list[str] = []
    if needs and choice in ("auto", "libreoffice") and office:
        try:
            converted = _libreoffice_convert(office, [paths[i] for i in needs])
            try:
                for i, conv in zip(needs, converted, strict=True):
                    results[i] = WorkbookValues(_sheet_values(open_workbook(conv, data_only=True)),
                                                engine="libreoffice")
            finally:
                shutil.rmtree(converted[0].parent.parent, ignore_errors=True)
            needs = []
        except (OSError, subprocess.SubprocessError, WorkbookError) as e:
            notes.append(f"LibreOffice failed ({type(e).__name__}: {e}); used the formulas engine")
    elif needs and choice == "libreoffice":
        notes.append("LibreOffice is not installed; used the formulas engine")
    for i in needs:
        results[i] = _formulas_values(paths[i], books[i], prefer[i], notes)
    return [r for r in results if r is not None]


def _formulas_values(path: Path, wb: Any, prefer_cached: bool, notes: list[str]) -> WorkbookValues:
    cached = _sheet_values(open_workbook(path, data_only=True))
    cached_by = {(s.name, r, c): v for s in cached for (r, c), v in s.cells.items()}
    try:
        computed = evaluate_formulas(path, wb)
    except Exception as e:  # an engine bug must not sink scoring; cached values are the fallback
        notes.append(f"formulas engine failed ({type(e).__name__}: {e}); used cached values")
        return WorkbookValues(cached, engine="cached", notes=list(notes))
    if prefer_cached:
        computed = {k: cached_by.get(k, v) for k, v in computed.items()}
    return WorkbookValues(_sheet_values(wb, computed), engine="formulas", notes=list(notes))


def evaluate_formulas(path: Path, wb: Any) -> dict[tuple[str, int, int], Any]:
    """Every formula cell's value from the `formulas` engine: (sheet, row, column) -> value."""
    import formulas
    from openpyxl.utils.cell import column_index_from_string, coordinate_from_string

    by_key = {ws.title.upper(): ws.title for ws in wb.worksheets}
    wanted = set(formula_cells(wb))
    with _FORMULAS_LOCK:
        _quiet_formulas()
        model = formulas.ExcelModel().loads(str(path)).finish()
        solution = model.calculate()
    out: dict[tuple[str, int, int], Any] = {}
    for key, ranges in solution.items():
        m = re.match(r"^'?\[[^\]]*\](.*?)'?!([A-Z]+[0-9]+)$", str(key))
        if not m or m.group(1) not in by_key:
            continue
        letters, row = coordinate_from_string(m.group(2))
        cell = (by_key[m.group(1)], row, column_index_from_string(letters))
        if cell in wanted:
            out[cell] = _plain(getattr(ranges, "value", ranges))
    return out


def _plain(value: Any) -> Any:
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


def _quiet_formulas() -> None:
    """The engine draws a tqdm progress bar on stderr; give its module a silent one instead."""
    import types

    import formulas.excel as excel

    class Silent:
        total = 0

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def __enter__(self) -> Silent:
            return self

        def __exit__(self, *exc: Any) -> bool:
            return False

        def update(self, *args: Any, **kwargs: Any) -> None:
            return None

        def refresh(self) -> None:
            return None

    if not getattr(excel.tqdm, "_unscaffold_silent", False):
        excel.tqdm = types.SimpleNamespace(tqdm=Silent, _unscaffold_silent=True)


def _profile() -> Path:
    """A LibreOffice user profile per thread: instances sharing one profile refuse to run together."""
    key = threading.get_ident()
    with _PROFILE_LOCK:
        if key not in _PROFILES:
            if not _PROFILE_ROOT:
                _PROFILE_ROOT.append(Path(tempfile.mkdtemp(prefix="unscaffold-lo-")))
                atexit.register(shutil.rmtree, _PROFILE_ROOT[0], True)
            _PROFILES[key] = _PROFILE_ROOT[0] / f"profile-{len(_PROFILES)}"
        return _PROFILES[key]


def _libreoffice_convert(office: str, paths: list[Path]) -> list[Path]:
    """Open and re-save each file with LibreOffice headless, which recalculates every formula."""
    work = Path(tempfile.mkdtemp(prefix="unscaffold-recalc-"))
    sources = []
    for i, p in enumerate(paths):  # distinct, simple names: the output is named after the input
        sources.append(work / "in" / f"book{i}.xlsx")
        sources[-1].parent.mkdir(exist_ok=True)
        shutil.copyfile(p, sources[-1])
    out = work / "out"
    argv = [office, f"-env:UserInstallation={_profile().as_uri()}", "--headless", "--norestore", "--nologo",
            "--convert-to", "xlsx", "--outdir", str(out), *map(str, sources)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "HOME": str(_profile().parent)})
    try:
        log, _ = proc.communicate(timeout=LIBREOFFICE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        shutil.rmtree(work, ignore_errors=True)
        raise
    results = [out / s.name for s in sources]
    missing = [r.name for r in results if not r.is_file()]
    if proc.returncode != 0 or missing:
        shutil.rmtree(work, ignore_errors=True)
        tail = log.decode(errors="replace").strip()[-200:]
        raise WorkbookError(f"conversion failed (exit {proc.returncode}, missing {missing}): {tail}")
    return results
