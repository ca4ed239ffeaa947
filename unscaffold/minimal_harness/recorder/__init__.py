"""Records what each of the student's commands did, for `trials/<id>/evidence.jsonl` (see `evidence.py`).

Per sandbox a host folder holds `lib/` (the in-sandbox recorder as `sitecustomize.py`, its settings in
`recorder.json`) and `out/` (one JSON-lines file per recorded process). Both are shown inside at
`EVIDENCE_ROOT` (lib read-only) and `lib/` goes on `PYTHONPATH`, so every Python the student starts
records its opens, execs, exit and the suites' library calls (`site_hook.py`); `PATH` and the output stay
as they were. Under the local sandbox, when a C compiler is at hand, `libexec.so` (`preload.c`) goes on
`LD_PRELOAD` too and records the programs other programs run and the files they open for writing or
reading (a shell's `cat answer.txt`, `echo x > answer.txt`). After each command the harness gathers the
lines of every process, orders them by their clock, and writes one `CommandEvidence` line.

Measurement, not a security boundary: nothing that guards a reward reads it."""

from __future__ import annotations

import json
import os
import shutil
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
from unscaffold.minimal_harness.recorder.site_hook import written_record
from unscaffold.minimal_harness.sandbox.base import Mount, SandboxConfig
from unscaffold.minimal_harness.sandbox.result import ExecResult

EVIDENCE_ROOT = "/run/unscaffold-evidence"  # inside the sandbox: lib/ (read-only) and out/
SITE_HOOK = Path(__file__).resolve().parent / "site_hook.py"
CONFIG_FILE = "recorder.json"
MAX_READ_BYTES = 32 * 1024**2  # of one command's lines, all processes together; the rest is cut
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
        shutil.copyfile(SITE_HOOK, lib / "sitecustomize.py")
        settings = {"workspace": workspace, "out": inside_out, "max_events": MAX_EVENTS_PER_COMMAND,
                    "max_value_chars": MAX_VALUE_CHARS, "max_content_bytes": MAX_CONTENT_BYTES}
        (lib / CONFIG_FILE).write_text(json.dumps(settings), encoding="utf-8")
        recorder = "python-audit"
        # The preload library is built for this host's C library: only where commands run on it.
        shared = preload.library() if config.kind in ("local", "none") else None
        if shared is not None:
            shutil.copyfile(shared, lib / preload.LIBRARY)
            recorder += "+ldpreload"
            config.env["LD_PRELOAD"] = _prepend(f"{inside_lib}/{preload.LIBRARY}", config.env.get("LD_PRELOAD"), " ")
            (lib / preload.CONF).write_text(preload.conf_text(inside_out, workspace, MAX_EVENTS_PER_COMMAND,
                                                              MAX_VALUE_CHARS), encoding="utf-8")
        for path in [*lib.iterdir(), lib]:
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
            try:
                with path.open("rb") as f:
                    data = f.read(budget + 1)
            except OSError:
                continue
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
            record = written_record(str(root / path), MAX_CONTENT_BYTES)
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


def append_evidence(path: Path, evidence: CommandEvidence) -> None:
    """One line appended in one write (O_APPEND): a reader never sees half of it. A trial run again from
    its start removes the file first (`reset_evidence`), so a rerun never mixes two attempts' lines."""
    line = evidence.model_dump_json().encode("utf-8") + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def reset_evidence(path: Path) -> None:
    path.unlink(missing_ok=True)


def _prepend(value: str, existing: str | None, separator: str) -> str:
    return f"{value}{separator}{existing}" if existing else value


__all__ = ["EVIDENCE_ROOT", "EvidenceRecorder", "append_evidence", "reset_evidence"]
