"""Records what each of the student's commands did, for `trials/<id>/evidence.jsonl` (see `evidence.py`).

Per sandbox a host folder holds `lib/` (the in-sandbox recorder, entered through `sitecustomize.py`, its
settings in `recorder.conf`) and `out/` (one JSON-lines file per recorded process). Both are shown inside at
`EVIDENCE_ROOT` (lib read-only) and `lib/` goes on `PYTHONPATH`, so every Python the student starts
records its opens, execs, exit and the suites' library calls (`site_hook.py`); `PATH` and the output stay
as they were. Under the local sandbox, when a C compiler is at hand, `libexec.so` (`preload.c`) goes on
`LD_PRELOAD` too and records the programs other programs run and the files they open for writing or
reading (a shell's `cat answer.txt`, `echo x > answer.txt`). After each command the harness gathers the
lines of every process, orders them by their clock, and writes one `CommandEvidence` line.

Measurement, not a security boundary: nothing that guards a reward reads it."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import py_compile
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from unscaffold.minimal_harness.evidence import (
    MAX_CONTENT_BYTES,
    MAX_EVENTS_PER_COMMAND,
    MAX_VALUE_CHARS,
    CommandEvidence,
    Event,
    ExecEvent,
    WriteCloseEvent,
)
from unscaffold.minimal_harness.recorder import preload
from unscaffold.minimal_harness.recorder.site_hook import file_record
from unscaffold.minimal_harness.sandbox.base import Mount, SandboxConfig
from unscaffold.minimal_harness.sandbox.result import ExecResult
from unscaffold.untrusted import UntrustedFileError, open_untrusted

EVIDENCE_ROOT = "/run/unscaffold-evidence"  # inside the sandbox: lib/ (read-only) and out/
SITE_HOOK = Path(__file__).resolve().parent / "site_hook.py"
MODULE = "unscaffold_recorder"  # the recorder's module name inside
# The entry Python's `site` imports: syntax every Python reads, so an image's Python 2 or 3.6 imports it
# without a word (a syntax error there would print "Error in sitecustomize"); only 3.10 and later record.
SITECUSTOMIZE = f"""import sys
if sys.version_info >= (3, 10):
    try:
        import {MODULE}
    except Exception:
        pass
"""
CONFIG_FILE = "recorder.conf"  # read by both recorders: lines of output folder, workspace and the caps
MAX_READ_BYTES = 16 * 1024**2  # of one command's lines, all processes together; the rest is cut
_EVENT = TypeAdapter(Event)


class EvidenceRecorder:
    """The recording of one trial's sandbox: `attach` before the sandbox opens (it adds the mounts and
    environment), `begin` before each command, `collect` after it, `close` at the end."""

    def __init__(self, config: SandboxConfig, folder: Path, recorder: str) -> None:
        self.config, self.folder, self.recorder = config, folder, recorder
        self.out = folder / "out"

    @classmethod
    def attach(cls, config: SandboxConfig) -> EvidenceRecorder:
        """Set up the folder and add to `config` what makes the sandbox record (in place)."""
        folder = Path(tempfile.mkdtemp(prefix="unscaffold-evidence-"))
        folder.chmod(0o755)
        lib, out = folder / "lib", folder / "out"
        lib.mkdir(mode=0o755)
        out.mkdir(mode=0o777)
        out.chmod(0o777)
        isolated = config.kind != "none"
        inside_lib = f"{EVIDENCE_ROOT}/lib" if isolated else str(lib)
        inside_out = f"{EVIDENCE_ROOT}/out" if isolated else str(out)
        workspace = config.cwd if isolated else str(Path(config.workspace).resolve())
        (lib / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
        shutil.copyfile(SITE_HOOK, lib / f"{MODULE}.py")
        (lib / "__pycache__").mkdir(mode=0o755)
        for name, code in _compiled().items():
            Path(importlib.util.cache_from_source(str(lib / name))).write_bytes(code)
        settings = [inside_out, workspace, MAX_EVENTS_PER_COMMAND, MAX_VALUE_CHARS, MAX_CONTENT_BYTES]
        (lib / CONFIG_FILE).write_text("".join(f"{value}\n" for value in settings), encoding="utf-8")
        recorder = "python-audit"
        # The preload library is built for this host's C library: only where commands run on it.
        shared = preload.library() if config.kind in ("local", "none") else None
        if shared is not None:
            shutil.copyfile(shared, lib / preload.LIBRARY)
            recorder += "+ldpreload"
            config.env["LD_PRELOAD"] = _prepend(f"{inside_lib}/{preload.LIBRARY}", config.env.get("LD_PRELOAD"), " ")
        for path in [*lib.rglob("*"), lib]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        if isolated:
            config.mounts += [Mount(source=lib, target=inside_lib), Mount(source=out, target=inside_out, writable=True)]
        config.env["PYTHONPATH"] = _prepend(inside_lib, config.env.get("PYTHONPATH"), ":")
        return cls(config, folder, recorder)

    def begin(self) -> None:
        """Drop what earlier commands (or the harness's own tools) left: the next lines are this command's."""
        try:
            for path in self.out.iterdir():
                path.unlink(missing_ok=True)
        except OSError:
            pass

    def collect(self, step: int, message_index: int, command: str, result: ExecResult) -> CommandEvidence:
        """The command's evidence: its own argv first, then every recorded event of its processes in the
        order they happened, with the exit status the harness saw."""
        lines, truncated = self._read_lines()
        lines.sort(key=lambda item: item[0])
        events: list[Any] = [ExecEvent(seq=0, argv=["bash", "-c", command[:MAX_VALUE_CHARS]])]
        for _, record in lines:
            if record.get("kind") == "dropped":
                truncated = True
                continue
            record["seq"] = len(events)
            try:
                events.append(_EVENT.validate_python(record))
            except ValidationError:
                continue  # a line the student forged or cut: not evidence
        events = self._final_writes(events)
        if len(events) > MAX_EVENTS_PER_COMMAND:
            events, truncated = events[:MAX_EVENTS_PER_COMMAND], True
        for seq, event in enumerate(events):
            event.seq = seq
        self.begin()
        return CommandEvidence(step=step, message_index=message_index, command=command, exit_code=result.exit_code,
                               timed_out=result.timed_out, events=events, truncated=truncated,
                               recorder=self.recorder)

    def _read_lines(self) -> tuple[list[tuple[tuple[int, int, int], dict[str, Any]]], bool]:
        """(clock, file, line) -> record for every line of every process; True when some were cut."""
        out: list[tuple[tuple[int, int, int], dict[str, Any]]] = []
        budget, truncated = MAX_READ_BYTES, False
        for number, path in enumerate(sorted(self.out.glob("*.jsonl"))):
            try:  # the student can write here too: a link or a FIFO is not read
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                continue
            with open(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue
                data = f.read(budget + 1)
            if len(data) > budget:
                data, truncated = data[:budget], True
            budget -= len(data)
            for index, raw in enumerate(data.splitlines()):
                try:
                    record = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("t"), int):
                    out.append(((record["t"], number, index), record))
            if budget <= 0:
                truncated = True
                break
        return out, truncated

    def _final_writes(self, events: list[Any]) -> list[Any]:
        """A workspace file a command opened for writing whose last `written` line is not its content now
        (written by a program without the Python recorder, or flushed only as Python shut down) gets one
        with its content now, right after the last open for writing or `written` line of that file."""
        last: dict[str, int] = {}
        for index, event in enumerate(events):
            if event.kind == "written" or (event.kind == "open" and event.mode != "r" and event.inside_workspace):
                last[event.path] = index
        inserts: list[tuple[int, Any]] = []
        root = Path(self.config.workspace)
        for path, index in last.items():
            record = _untrusted_record(root, path)
            earlier = [e for e in events if e.kind == "written" and e.path == path]
            if record is None or (earlier and earlier[-1].sha256 == record["sha256"]):
                continue
            source = events[index]
            record.update(path=path, seq=0, pid=source.pid, program=source.program)
            inserts.append((index, WriteCloseEvent.model_validate(record)))
        for index, event in sorted(inserts, key=lambda item: -item[0]):
            events.insert(index + 1, event)
        return events

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _untrusted_record(root: Path, relative: str) -> dict[str, Any] | None:
    """A workspace file's `written` fields, read as hostile input (no link followed: the student names
    every path, and the host reads as root); None when it is gone or refused."""
    try:
        fd = open_untrusted(root, relative)
    except (UntrustedFileError, OSError):
        return None
    os.set_blocking(fd, True)
    with open(fd, "rb") as f:
        return file_record(f, MAX_CONTENT_BYTES)


def append_evidence(path: Path, evidence: CommandEvidence) -> None:
    """One line appended in one write (O_APPEND): a reader never sees half of it. A trial run again from
    its start removes the file first (`reset_evidence`), so a rerun never mixes two attempts' lines."""
    line = evidence.model_dump_json().encode("utf-8") + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@functools.cache
def _compiled() -> dict[str, bytes]:
    """The recorder's bytecode (file name -> .pyc), compiled once per process and trusted as made (no
    source check): the sandbox writes no bytecode, and compiling the recorder at every Python start would
    cost more than all it records. A Python of another version (a docker image's) looks for its own cache
    name and compiles the source instead."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="unscaffold-recorder-") as scratch:
        for name, text in (("sitecustomize.py", SITECUSTOMIZE), (f"{MODULE}.py", SITE_HOOK.read_text("utf-8"))):
            source, target = Path(scratch) / name, Path(scratch) / f"{name}c"
            source.write_text(text, encoding="utf-8")
            py_compile.compile(str(source), cfile=str(target), dfile=name, doraise=True,
                               invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
            out[name] = target.read_bytes()
    return out


def reset_evidence(path: Path) -> None:
    path.unlink(missing_ok=True)


def _prepend(value: str, existing: str | None, separator: str) -> str:
    return f"{value}{separator}{existing}" if existing else value


__all__ = ["EVIDENCE_ROOT", "EvidenceRecorder", "append_evidence", "reset_evidence"]
