"""The answer cells of a workbook as a spreadsheet application shows them, each step bounded.

openpyxl never evaluates formulas, so the official pipeline opens every file in LibreOffice first and
reads the values it caches. Here the engine is chosen once and recorded: LibreOffice where it is
installed (or asked for), else the `formulas` engine, which computes only the formula cells the file
caches no value for. A workbook with formulas is recalculated by that engine and by no other: when
LibreOffice gives no workbook back the case fails with a recalculation failure, never a quiet change of
engine. A workbook that refers to other workbooks (external links, foreign-book references in any
formula) is never handed to an engine, which would load what it names: its cached values are read,
and an output's answer cells that name another book are wrong. Reading runs in a bounded child; every
engine run is a bounded child in a local sandbox (its own unprivileged uid, a fixed environment with
nothing of the host's, no network, its working folder holding the one workbook and nothing else of the
host's files but its programs), or, without bubblewrap, a bounded child as `nobody` in that folder.
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

from unscaffold.bounded import (
    STDERR_TAIL,
    Deadline,
    Finished,
    LimitExceeded,
    Worker,
    raise_for_death,
    run_bounded,
)
from unscaffold.untrusted import UntrustedFileError, read_untrusted, size_text

from .ranges import column_letters, quote_sheet
from .reader import decode

EngineChoice = Literal["auto", "libreoffice", "formulas"]
Engine = Literal["libreoffice", "formulas"]
ENGINE_ENV = "UNSCAFFOLD_SPREADSHEET_ENGINE"
READER = [sys.executable, "-I", str(Path(__file__).resolve().parent / "reader.py")]
_FORMULA_TAG = re.compile(rb"<(?:[A-Za-z0-9_]+:)?f[\s>/]")  # a <f> element in worksheet XML
_SHEET_XML = re.compile(r"^xl/worksheets/[^/]+\.xml$", re.IGNORECASE)
_PROFILE_ROOT: list[Path] = []
_PROFILE_LOCK = threading.Lock()
_POOL: dict[int, list[Worker]] = {}  # idle reader children by memory limit
_POOL_LOCK = threading.Lock()
NOBODY = 65534  # who an engine runs as without bubblewrap, when the host is root
ANSWER_BYTES = 64 << 20  # the largest answer the formulas engine may leave


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


class RecalculationFailed(Exception):
    """The engine ran and ended normally but gave no usable workbook back (LibreOffice exits 0 and writes
    nothing for a package it cannot open): the file, not the scorer, is at fault."""


class ForeignReference(str):
    """An answer cell whose formula names another workbook: never equal to any value (values.py compares
    types first) and never followed."""

    def __repr__(self) -> str:
        return f"a reference to another workbook ({str(self)}), not followed"


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


def engine_for(engine: EngineChoice | None = None) -> Engine:
    """The one engine that recalculates: auto is LibreOffice where installed, else `formulas`. Raises
    ScoringError when LibreOffice is asked for and missing (never another engine in its place)."""
    choice = chosen_engine(engine)
    if choice == "formulas":
        return "formulas"
    if libreoffice() is not None:
        return "libreoffice"
    if choice == "libreoffice":
        raise ScoringError("the libreoffice engine was chosen but LibreOffice (soffice) is not installed")
    return "formulas"


def engine_summary(engine: EngineChoice | None = None) -> str:
    """Which engine recalculates formulas in this set-up, in words, for results.json."""
    choice, office = chosen_engine(engine), libreoffice()
    if choice == "formulas":
        return f"formulas (chosen{' by $' + ENGINE_ENV if engine is None else ''}); cached values first"
    if office is None:
        if choice == "libreoffice":
            return "libreoffice (chosen, not installed: workbooks with formulas cannot be scored)"
        return "formulas (LibreOffice is not installed); cached values first"
    return f"libreoffice ({office}); a workbook it cannot convert fails with a recalculation failure"


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
    """Nothing of the host's environment (keys, tokens): a fixed one, numpy's pools kept to one thread."""
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def _child(request: dict[str, Any], what: str, limit_s: float, limits: Limits, deadline: Deadline
           ) -> dict[str, Any]:
    """A reader request (`read` or `links`, which load no other file) on a pooled reader child."""
    return _ask_worker(request, what, deadline.step(limit_s, what), limits.memory_bytes)


def find_links(path: Path, limits: Limits, deadline: Deadline) -> list[str]:
    """What in the workbook refers to other workbooks (read by the reader, before any engine sees it)."""
    answer = _child({"op": "links", "path": str(path)}, f"reading the links of {path.name}", limits.read_s, limits,
                    deadline)
    if "error" in answer:
        raise WorkbookError(f"{path.name} {answer['message']}", path)
    return [str(link) for link in answer["links"]]


def read_cells(path: Path, *, position: str | None, ranges: list[Any] | None, uncached: bool, limits: Limits,
               deadline: Deadline, foreign: bool = False) -> dict[str, Any]:
    """The reader's answer for one workbook; raises WorkbookError or ScoringError for what it reports."""
    answer = _child({"op": "read", "path": str(path), "position": position, "ranges": ranges,
                     "uncached": uncached, "foreign": foreign}, f"reading {path.name}", limits.read_s, limits,
                    deadline)
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
                deadline: Deadline | None = None, output: bool = False) -> WorkbookValues:
    """The answer cells of one workbook: `position` resolves against its own sheets (a golden),
    `ranges` are already resolved (an output). With `output`, answer cells naming another workbook hold
    a ForeignReference. Raises WorkbookError, ScoringError, RecalculationFailed or LimitExceeded."""
    if (position is None) == (ranges is None):
        raise ValueError("load_values needs either an answer_position or resolved ranges")
    limits = limits or Limits()
    deadline = deadline or Deadline(limits.case_s)
    path = Path(path)
    if not path.is_file():
        raise WorkbookError(f"{path.name} does not exist", path)
    notes: list[str] = []
    if not has_formulas(path, limits):
        return _values(read_cells(path, position=position, ranges=ranges, uncached=False, limits=limits,
                                  deadline=deadline), "none", notes)
    chosen = engine_for(engine)
    linked = find_links(path, limits, deadline)
    if linked:
        return _unrecalculated(path, linked, position, ranges, output, limits, deadline)
    if chosen == "libreoffice":
        work = Path(tempfile.mkdtemp(prefix="unscaffold-recalc-", dir=engine_tmp()))
        try:
            converted = _libreoffice_convert(str(libreoffice()), path, work, limits, deadline)
            try:
                answer = read_cells(converted, position=position, ranges=ranges, uncached=False, limits=limits,
                                    deadline=deadline)
            except WorkbookError as e:
                why = str(e).removeprefix("converted.xlsx ")
                raise RecalculationFailed(f"LibreOffice's workbook from {path.name} {why}") from None
            return _values(answer, "libreoffice", notes)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    answer = read_cells(path, position=position, ranges=ranges, uncached=True, limits=limits, deadline=deadline)
    values = _values(answer, "cached", notes)
    missing = [tuple(c) for c in answer.get("uncached", [])]
    if missing:
        _compute(path, missing, values, limits, deadline)
    return values


def _unrecalculated(path: Path, linked: list[str], position: str | None, ranges: list[Any] | None, output: bool,
                    limits: Limits, deadline: Deadline) -> WorkbookValues:
    """A workbook that refers to other workbooks: its cached values, no engine. An output's answer cells
    naming another book hold a ForeignReference; a golden's formula cells must carry cached values."""
    more = f" and {len(linked) - 1} more" if len(linked) > 1 else ""
    notes = [f"{path.name} was not recalculated: it refers to other workbooks ({linked[0]}{more}), which are "
             "never followed"]
    answer = read_cells(path, position=position, ranges=ranges, uncached=True, foreign=output, limits=limits,
                        deadline=deadline)
    values = _values(answer, "cached", notes)
    if output:
        for sheet, row, col, ref in answer.get("foreign", []):
            values.sheets[sheet].cells[(row, col)] = ForeignReference(ref)
    elif answer.get("uncached"):
        sheet, row, col = answer["uncached"][0]
        raise ScoringError(f"{len(answer['uncached'])} formula cell(s) of {path.name} in answer_position have no "
                           f"cached value (first {_cell(sheet, row, col)}) and the workbook refers to other "
                           "workbooks, so no engine computes them")
    return values


def _compute(path: Path, missing: list[tuple[str, int, int]], values: WorkbookValues, limits: Limits,
             deadline: Deadline) -> None:
    """Fill formula cells without a cached value from the `formulas` engine, or say why it cannot."""
    what = f"the formulas engine on {path.name}"
    try:
        answer = _formulas_engine(path, missing, what, deadline.step(limits.formulas_s, what), limits.memory_bytes)
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


def _formulas_engine(path: Path, missing: list[tuple[str, int, int]], what: str, time_s: float,
                     memory_bytes: int) -> dict[str, Any]:
    """The engine's answer for `missing`, computed on a copy of the workbook alone in a fresh folder
    (a formula naming `../x/[book.xlsx]` finds nothing of the host's there), in a bounded sandbox."""
    work = Path(tempfile.mkdtemp(prefix="unscaffold-formulas-", dir=engine_tmp()))
    try:
        shutil.copyfile(path, work / "book.xlsx")
        for name in ("reader.py", "ranges.py"):  # the engine's code beside it, nothing else of the project
            shutil.copyfile(Path(__file__).resolve().parent / name, work / name)
        request = {"path": "book.xlsx", "cells": [list(c) for c in missing]}
        (work / "request.json").write_text(json.dumps(request) + "\n", encoding="utf-8")
        command = f"exec {shlex.quote(sys.executable)} -I reader.py formulas <request.json >answer.json"
        done = _run_isolated(["/bin/sh", "-c", command], work, [], what, time_s, memory_bytes)
        try:
            text = read_untrusted(work, "answer.json", ANSWER_BYTES).decode("utf-8", errors="replace")
        except UntrustedFileError as e:
            text, why = "", str(e)
        else:
            why = "no answer"
        try:
            answer = json.loads(text)
        except json.JSONDecodeError:
            last = (done.stderr_tail.splitlines() or [why])[-1][-200:]
            if done.returncode == 126 and not reachable_by_others(Path(sys.executable)):
                raise LimitExceeded(f"{what} cannot run unprivileged: {sys.executable} lies where the unprivileged "
                                    "user cannot reach it; install bubblewrap (the engine's sandbox) or use a "
                                    "Python installed outside a private home") from None
            raise LimitExceeded(f"{what} failed (exit {done.returncode}): {last}") from None
        if not isinstance(answer, dict):
            raise LimitExceeded(f"{what} failed: its answer is not an object")
        if answer.get("error") == "memory":
            raise LimitExceeded(f"{what} ran past its {size_text(memory_bytes)} memory limit")
        return answer
    finally:
        shutil.rmtree(work, ignore_errors=True)


def reachable_by_others(path: Path) -> bool:
    """Whether a user other than the owner can execute `path`: every folder above its real file searchable and
    the file executable by others (a virtualenv's Python may point into a private home)."""
    real = path.resolve()
    folders = [p for p in real.parents]
    return all(p.stat().st_mode & 0o001 for p in folders) and bool(real.stat().st_mode & 0o001)


def engine_tmp() -> str:
    """Where engines' folders are made: the temporary folder where `nobody` can reach it, else /tmp (a
    private $TMPDIR would lock the unprivileged fallback out of its own folder)."""
    folder = Path(tempfile.gettempdir()).resolve()
    try:
        reachable = all(p.stat().st_mode & 0o001 for p in (folder, *folder.parents))
    except OSError:
        reachable = False
    return str(folder) if reachable else "/tmp"


def _cell(sheet: str, row: int, col: int) -> str:
    return f"{quote_sheet(sheet)}!{column_letters(col)}{row}"


def _profile_dir() -> Path:
    """A LibreOffice user profile per thread, reused (a fresh one costs a second per conversion):
    instances sharing one profile refuse to run together."""
    with _PROFILE_LOCK:
        if not _PROFILE_ROOT:
            root = Path(tempfile.mkdtemp(prefix="unscaffold-lo-", dir=engine_tmp()))
            root.chmod(0o711)  # an engine run as `nobody` reaches its own profile, lists none
            _PROFILE_ROOT.append(root)
            atexit.register(shutil.rmtree, _PROFILE_ROOT[0], True)
    return _PROFILE_ROOT[0] / f"profile-{threading.get_ident()}"


def _libreoffice_convert(office: str, path: Path, work: Path, limits: Limits, deadline: Deadline) -> Path:
    """Open and re-save a copy of the file, alone in `work`, with LibreOffice headless, which recalculates
    every formula; the result is taken out following no link. Raises RecalculationFailed when LibreOffice
    ends normally but leaves no workbook, LimitExceeded when it runs past a limit or dies."""
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
        done = _run_isolated(argv, work, [profile], what, deadline.step(limits.libreoffice_s, what),
                             limits.memory_bytes)
    except LimitExceeded:
        shutil.rmtree(profile, ignore_errors=True)  # a killed instance can leave it locked
        raise
    last = (done.stderr_tail.splitlines() or ["no message"])[-1][-200:]
    if done.returncode != 0:
        raise RecalculationFailed(f"LibreOffice failed on {path.name} (exit {done.returncode}): {last}")
    converted = work / "converted.xlsx"
    try:
        converted.write_bytes(read_untrusted(work, "out/book.xlsx", limits.file_bytes))
    except UntrustedFileError as e:
        found = "no workbook" if not e.refused else f"no usable workbook ({e})"
        raise RecalculationFailed(f"LibreOffice gave {found} back from {path.name} (exit 0): {last}") from None
    return converted


def _run_isolated(argv: list[str], work: Path, writable: list[Path], what: str, time_s: float, memory_bytes: int
                  ) -> Finished:
    """`argv` in a local sandbox over `work` (its working folder) with the `writable` folders shown at
    their own paths; without bubblewrap, a bounded child in `work` with a fixed environment of PATH and
    HOME only, as `nobody` when the host is root."""
    if shutil.which("bwrap") is None:
        return _run_unprivileged(argv, work, writable, what, time_s, memory_bytes)
    from unscaffold.minimal_harness.sandbox.base import Limits as SandboxLimits
    from unscaffold.minimal_harness.sandbox.base import Mount, SandboxConfig
    from unscaffold.minimal_harness.sandbox.local import LocalSandbox

    mounts = [Mount(source=folder, target=str(folder), writable=True) for folder in writable]
    config = SandboxConfig(kind="local", workspace=work, timeout_s=time_s, mounts=mounts,
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


def _run_unprivileged(argv: list[str], work: Path, writable: list[Path], what: str, time_s: float,
                      memory_bytes: int) -> Finished:
    """The fallback without bubblewrap: as root, `work` and `writable` are handed to `nobody` for the run
    and the program drops to it (no groups, no capabilities) before it starts."""
    from unscaffold.minimal_harness.sandbox.identity import chown_tree

    setpriv = shutil.which("setpriv", path="/usr/bin:/bin")
    drop = os.geteuid() == 0 and setpriv is not None
    if drop:
        for folder in [work, *writable]:
            chown_tree(folder, NOBODY, NOBODY)
        argv = [str(setpriv), f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all", "--",
                *argv]
    try:
        done = run_bounded(argv, what=what, time_s=time_s, memory_bytes=memory_bytes, cwd=str(work),
                           env={"PATH": "/usr/bin:/bin", "HOME": str(writable[0].parent if writable else work)})
    finally:
        if drop:
            for folder in [work, *writable]:
                chown_tree(folder, os.getuid(), os.getgid())
    return Finished(done.returncode, done.stdout, done.stderr_tail)
