"""The answer cells of a workbook as a spreadsheet application shows them, each step bounded.

openpyxl never evaluates formulas, so the official pipeline opens every file in LibreOffice first and
reads the values it caches. Here too, where LibreOffice is installed: a workbook with formulas is
converted by LibreOffice headless, then read. Without LibreOffice (or when it fails) the values the
file already caches are used, and only formula cells without one are computed by the `formulas`
engine; a cached value is never dropped because an engine failed. Reading, conversion and the engine
each run in a child process under a time and memory limit (unscaffold.bounded) and every result says
which engine produced it, with a note for each fallback taken.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from unscaffold.benchmarks.spreadsheet.ranges import column_letters, quote_sheet
from unscaffold.benchmarks.spreadsheet.reader import decode
from unscaffold.bounded import (
    STDERR_TAIL,
    Deadline,
    Finished,
    LimitExceeded,
    Worker,
    raise_for_death,
    run_bounded,
)
from unscaffold.untrusted import size_text

EngineChoice = Literal["auto", "libreoffice", "formulas"]
ENGINE_ENV = "UNSCAFFOLD_SPREADSHEET_ENGINE"
READER = [sys.executable, "-I", str(Path(__file__).resolve().parent / "reader.py")]
_FORMULA_TAG = re.compile(rb"<(?:[A-Za-z0-9_]+:)?f[\s>/]")  # a <f> element in worksheet XML
_SHEET_XML = re.compile(r"^xl/worksheets/[^/]+\.xml$", re.IGNORECASE)
_PROFILE_ROOT: list[Path] = []
_PROFILE_LOCK = threading.Lock()
_POOL: dict[int, list[Worker]] = {}  # idle reader children by memory limit
_POOL_LOCK = threading.Lock()


@dataclass(frozen=True)
class Limits:
    """Per-step limits for scoring one test case; `case_s` bounds all of the case's steps together."""

    read_s: float = 60.0  # opening one workbook with openpyxl
    libreoffice_s: float = 120.0  # one LibreOffice conversion (the official script's timeout)
    formulas_s: float = 60.0  # the `formulas` engine on one workbook
    case_s: float = 300.0
    memory_bytes: int = 3 << 30  # address space of each child
    file_bytes: int = 64 << 20  # an output workbook larger than this is refused
    unzipped_bytes: int = 1 << 30  # the sum of a workbook's uncompressed parts


class WorkbookError(Exception):
    """The file is missing, is not an xlsx workbook, or cannot be read; `path` says which file."""

    def __init__(self, message: str, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class ScoringError(Exception):
    """The case cannot be judged (a bad answer_position, a value no engine could compute)."""


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
    """The stored values inside the answer ranges only (never a whole sheet)."""

    sheetnames: list[str]
    ranges: list[tuple[str, int | None, int | None, int | None, int | None]]
    sheets: dict[str, SheetValues]
    engine: str = "none"  # libreoffice, formulas, cached, or none (no formulas to compute)
    notes: list[str] = field(default_factory=list)

    def sheet(self, name: str) -> SheetValues | None:
        return self.sheets.get(name)


def libreoffice() -> str | None:
    """The LibreOffice binary, if installed."""
    return shutil.which("soffice") or shutil.which("libreoffice")


def chosen_engine(engine: EngineChoice | None = None) -> EngineChoice:
    """The explicit choice, else $UNSCAFFOLD_SPREADSHEET_ENGINE, else auto."""
    choice = engine or os.environ.get(ENGINE_ENV) or "auto"
    if choice not in ("auto", "libreoffice", "formulas"):
        raise ValueError(f"${ENGINE_ENV}: unknown engine {choice!r}; use auto, libreoffice or formulas")
    return choice  # type: ignore[return-value]


def engine_summary(engine: EngineChoice | None = None) -> str:
    """Which engine recalculates formulas in this set-up, in words, for results.json."""
    choice, office = chosen_engine(engine), libreoffice()
    if choice == "formulas":
        return f"formulas (chosen{' by $' + ENGINE_ENV if engine is None else ''}); cached values first"
    if office is None:
        return "formulas (LibreOffice is not installed); cached values first"
    return f"libreoffice ({office}); cached values and formulas where it fails"


def has_formulas(path: Path, limits: Limits) -> bool:
    """Whether any worksheet holds a formula, from the zip without parsing the workbook. Raises
    WorkbookError for a file that is not an xlsx archive or unpacks beyond the limit."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            if sum(i.file_size for i in infos) > limits.unzipped_bytes:
                raise WorkbookError(f"{path.name} unpacks to more than {size_text(limits.unzipped_bytes)}", path)
            budget = limits.unzipped_bytes
            for info in infos:
                if not _SHEET_XML.match(info.filename):
                    continue
                with archive.open(info) as part:
                    tail = b""
                    while chunk := part.read(1 << 20):
                        budget -= len(chunk)
                        if budget < 0:  # sizes in the directory can lie
                            raise WorkbookError(f"{path.name} unpacks to more than "
                                                f"{size_text(limits.unzipped_bytes)}", path)
                        if _FORMULA_TAG.search(tail + chunk):
                            return True
                        tail = chunk[-16:]
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError):
        raise WorkbookError(f"{path.name} is not an xlsx workbook (not a zip archive)", path) from None
    except (OSError, RuntimeError, NotImplementedError, ValueError) as e:  # damaged or encrypted parts
        raise WorkbookError(f"{path.name} cannot be read: {type(e).__name__}: {e}", path) from None
    return False


def _ask_worker(request: dict[str, Any], what: str, time_s: float, memory_bytes: int) -> dict[str, Any]:
    """A reader request on an idle worker child (started if none is idle), which returns to the pool."""
    with _POOL_LOCK:
        idle = _POOL.setdefault(memory_bytes, [])
        worker = idle.pop() if idle else Worker([*READER, "read"], memory_bytes, env=_child_env())
    try:
        return worker.ask(request, what=what, time_s=time_s)
    finally:
        with _POOL_LOCK:
            _POOL[memory_bytes].append(worker)


def _close_workers() -> None:
    with _POOL_LOCK:
        for workers in _POOL.values():
            for worker in workers:
                worker.close()


atexit.register(_close_workers)


def _child_env() -> dict[str, str]:
    return {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}  # numpy's pools grow per core


def _child(request: dict[str, Any], what: str, limit_s: float, limits: Limits, deadline: Deadline
           ) -> dict[str, Any]:
    time_s = deadline.step(limit_s, what)
    if request["op"] == "read":
        return _ask_worker(request, what, time_s, limits.memory_bytes)
    done = run_bounded([*READER, request["op"]], what=what, time_s=time_s, memory_bytes=limits.memory_bytes,
                       stdin=json.dumps(request).encode() + b"\n", env=_child_env())
    try:
        answer = json.loads(done.stdout)
    except json.JSONDecodeError:
        last = (done.stderr_tail.splitlines() or ["no output"])[-1]
        raise LimitExceeded(f"{what} failed (exit {done.returncode}): {last}") from None
    if answer.get("error") == "memory":
        raise LimitExceeded(f"{what} ran past its {size_text(limits.memory_bytes)} memory limit")
    return answer


def read_cells(path: Path, *, position: str | None, ranges: list[Any] | None, uncached: bool, limits: Limits,
               deadline: Deadline) -> dict[str, Any]:
    """The reader's answer for one workbook; raises WorkbookError or ScoringError for what it reports."""
    answer = _child({"op": "read", "path": str(path), "position": position, "ranges": ranges,
                     "uncached": uncached}, f"reading {path.name}", limits.read_s, limits, deadline)
    if answer.get("error") == "unreadable":
        raise WorkbookError(f"{path.name} {answer['message']}", path)
    if "error" in answer:
        raise ScoringError(answer["message"])
    return answer


def _values(answer: dict[str, Any], engine: str, notes: list[str]) -> WorkbookValues:
    sheets = {}
    for name, (max_row, max_col) in answer["sizes"].items():
        cells = {(r, c): decode(v) for r, c, v in answer["cells"].get(name, [])}
        sheets[name] = SheetValues(name, cells, max_row, max_col)
    return WorkbookValues(answer["sheetnames"], [tuple(b) for b in answer["ranges"]], sheets, engine, notes)


def load_values(path: Path, *, position: str | None = None, ranges: list[Any] | None = None,
                engine: EngineChoice | None = None, limits: Limits | None = None,
                deadline: Deadline | None = None) -> WorkbookValues:
    """The answer cells of one workbook: `position` resolves against its own sheets (a golden),
    `ranges` are already resolved (an output). Raises WorkbookError, ScoringError or LimitExceeded."""
    if (position is None) == (ranges is None):
        raise ValueError("load_values needs either an answer_position or resolved ranges")
    limits = limits or Limits()
    deadline = deadline or Deadline(limits.case_s)
    choice = chosen_engine(engine)
    path = Path(path)
    if not path.is_file():
        raise WorkbookError(f"{path.name} does not exist", path)
    notes: list[str] = []
    formulas = has_formulas(path, limits)
    office = libreoffice() if formulas and choice != "formulas" else None
    if formulas and choice == "libreoffice" and office is None:
        notes.append("LibreOffice is not installed; used cached values and the formulas engine")
    if office is not None:
        work = Path(tempfile.mkdtemp(prefix="unscaffold-recalc-"))
        try:
            converted = _libreoffice_convert(office, path, work, limits, deadline)
            return _values(read_cells(converted, position=position, ranges=ranges, uncached=False, limits=limits,
                                      deadline=deadline), "libreoffice", notes)
        except (LimitExceeded, WorkbookError) as e:
            notes.append(f"LibreOffice failed on {path.name} ({e}); used cached values and the formulas engine")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    answer = read_cells(path, position=position, ranges=ranges, uncached=formulas, limits=limits, deadline=deadline)
    values = _values(answer, "cached" if formulas else "none", notes)
    missing = [tuple(c) for c in answer.get("uncached", [])]
    if missing:
        _compute(path, missing, values, limits, deadline)
    return values


def _compute(path: Path, missing: list[tuple[str, int, int]], values: WorkbookValues, limits: Limits,
             deadline: Deadline) -> None:
    """Fill formula cells without a cached value from the `formulas` engine, or say why it cannot."""
    try:
        answer = _child({"op": "formulas", "path": str(path), "cells": missing},
                        f"the formulas engine on {path.name}", limits.formulas_s, limits, deadline)
        if "error" in answer:
            raise LimitExceeded(f"the formulas engine failed on {path.name}: {answer['message']}")
    except LimitExceeded as e:
        values.notes.append(str(e))
        raise ScoringError(f"{len(missing)} formula cell(s) of {path.name} in answer_position have no cached "
                           f"value and could not be computed: {e}") from None
    values.engine = "formulas"
    computed = {(s, r, c): decode(v) for s, r, c, v in answer["values"]}
    errors = []
    for cell in missing:
        sheet, row, col = cell
        if cell not in computed:
            raise ScoringError(f"the formulas engine gave no value for {_cell(sheet, row, col)} of {path.name}")
        value = computed[cell]
        if value is not None:
            values.sheets[sheet].cells[(row, col)] = value
        if isinstance(value, str) and value.startswith("#"):
            errors.append(f"{_cell(sheet, row, col)}={value}")
    if errors:
        values.notes.append(f"the formulas engine gave error values ({', '.join(errors[:3])}"
                            + (", ..." if len(errors) > 3 else "") + "); it lacks some Excel functions")


def _cell(sheet: str, row: int, col: int) -> str:
    return f"{quote_sheet(sheet)}!{column_letters(col)}{row}"


def _profile_dir() -> Path:
    """A LibreOffice user profile per thread, reused (a fresh one costs a second per conversion):
    instances sharing one profile refuse to run together."""
    with _PROFILE_LOCK:
        if not _PROFILE_ROOT:
            _PROFILE_ROOT.append(Path(tempfile.mkdtemp(prefix="unscaffold-lo-")))
            atexit.register(shutil.rmtree, _PROFILE_ROOT[0], True)
    return _PROFILE_ROOT[0] / f"profile-{threading.get_ident()}"


def _libreoffice_convert(office: str, path: Path, work: Path, limits: Limits, deadline: Deadline) -> Path:
    """Open and re-save the file with LibreOffice headless, which recalculates every formula. The file is
    the student's, so LibreOffice runs as the trial's commands do: in a local sandbox (its own uid as
    root, no network, a fixed environment with nothing of the host's, bounded time, processes and
    memory), seeing only the folder of this conversion and its own profile."""
    source = work / "in" / "book.xlsx"  # a plain name: LibreOffice names its output after the input
    source.parent.mkdir()
    (work / "out").mkdir()
    shutil.copyfile(path, source)
    profile = _profile_dir()
    profile.mkdir(parents=True, exist_ok=True)
    what = f"LibreOffice converting {path.name}"
    argv = [office, f"-env:UserInstallation={profile.as_uri()}", "--headless", "--norestore", "--nologo", "--calc",
            "--convert-to", "xlsx:Calc MS Excel 2007 XML", "--outdir", str(work / "out"), str(source)]
    try:
        done = _run_isolated(argv, work, profile, what, deadline.step(limits.libreoffice_s, what), limits.memory_bytes)
    except LimitExceeded:
        shutil.rmtree(profile, ignore_errors=True)  # a killed instance can leave it locked
        raise
    converted = work / "out" / "book.xlsx"
    if done.returncode != 0 or not converted.is_file():
        last = (done.stderr_tail.splitlines() or ["no message"])[-1][-200:]
        raise WorkbookError(f"conversion failed (exit {done.returncode}): {last}", path)
    return converted


def _run_isolated(argv: list[str], work: Path, profile: Path, what: str, time_s: float, memory_bytes: int
                  ) -> Finished:
    """`argv` in a local sandbox over `work` with `profile` writable; without bubblewrap, a bounded child
    with an environment of PATH and HOME only."""
    if shutil.which("bwrap") is None:
        return run_bounded(argv, what=what, time_s=time_s, memory_bytes=memory_bytes,
                           env={"PATH": "/usr/bin:/bin", "HOME": str(profile.parent)})
    from unscaffold.minimal_harness.sandbox.base import Limits as SandboxLimits
    from unscaffold.minimal_harness.sandbox.base import Mount, SandboxConfig
    from unscaffold.minimal_harness.sandbox.local import LocalSandbox

    config = SandboxConfig(kind="local", workspace=work, timeout_s=time_s,
                           mounts=[Mount(source=profile, target=str(profile), writable=True)],
                           limits=SandboxLimits(memory_bytes=memory_bytes, sandbox_memory_bytes=memory_bytes))
    sandbox = LocalSandbox(config)
    try:
        result = sandbox.execute(shlex.join(argv), timeout_s=time_s)
    finally:
        sandbox.close()
    if result.timed_out:
        raise LimitExceeded(f"{what} ran past its {time_s:g} s time limit and was stopped")
    tail = result.output.strip()[-STDERR_TAIL:]
    if result.exit_code - 128 in {s.value for s in signal.Signals}:  # bash's code for a death by a signal
        raise_for_death(128 - result.exit_code, tail, what, time_s, memory_bytes)
    return Finished(result.exit_code, b"", tail)
