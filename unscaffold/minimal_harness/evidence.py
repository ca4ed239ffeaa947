"""What each command did, recorded while it ran: the record behaviour detectors decide from.

`trials/<id>/evidence.jsonl` holds one `CommandEvidence` line per executed command of the student (the
`execute` calls that ran, in order; a format-error turn runs nothing and has no line). Events inside a
command are in the order they happened (`seq` counts up across every process of that command).

Evidence is measurement, not a security boundary: a student can avoid or forge it, so nothing that
guards a reward reads it. It never changes what the student sees (no output, same PATH)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# Bounds a recorder keeps so one command cannot make its record unbounded.
MAX_EVENTS_PER_COMMAND = 5_000
MAX_VALUE_CHARS = 2_000  # a recorded argument, result or file content is cut to this many characters
MAX_CONTENT_BYTES = 64 * 1024  # a written workspace file's content is kept when it is at most this big


class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore")
    seq: int = Field(ge=0, description="order within the command, across all its processes")
    pid: int = 0
    program: str = Field("", description="basename of the executable that did it (python3, bash, cat, ...)")


class OpenEvent(_Event):
    """A file opened (Python's `open` audit event, or a traced `open`/`openat` of another program)."""

    kind: Literal["open"] = "open"
    path: str = Field(description="relative to the workspace root when inside it (no leading ./), else absolute")
    mode: Literal["r", "w", "a", "rw", "x"] = Field(description="r read; w truncate+write; a append; rw update; "
                                                    "x exclusive create")
    inside_workspace: bool = True


class WriteCloseEvent(_Event):
    """A workspace file closed after writing: its content afterwards (when small), so a detector can ask
    whether a later read or call saw the current content."""

    kind: Literal["written"] = "written"
    path: str
    size: int = Field(ge=0)
    sha256: str
    content: str | None = Field(None, description="UTF-8 text when the file is at most MAX_CONTENT_BYTES and decodes")


class ExecEvent(_Event):
    """A program started (execve, `subprocess`, `os.system`): the program and its arguments."""

    kind: Literal["exec"] = "exec"
    argv: list[str]


class CallEvent(_Event):
    """A suite's library call of interest: the callable's dotted name, the values it received, and
    whether it returned or raised (`ok`), with a short description of what came back."""

    kind: Literal["call"] = "call"
    name: str = Field(description="e.g. rdkit.Chem.MolFromSmiles, openpyxl.load_workbook, appworld.spotify.show_song")
    args: list[Any] = Field(default_factory=list, description="positional values, each JSON-safe and cut")
    keywords: dict[str, Any] = Field(default_factory=dict, description="keyword values, each JSON-safe and cut")
    ok: bool = Field(description="returned without raising")
    result: Any = Field(None, description="a JSON-safe summary of the return value (None for a None return)")
    error: str | None = Field(None, description="`ExcType: message` when it raised")


class ExitEvent(_Event):
    """A recorded process ended: its exit status and, for Python, the uncaught exception that ended it."""

    kind: Literal["exit"] = "exit"
    code: int | None = None
    exception: str | None = Field(None, description="`ExcType: message` of an uncaught exception")


Event = Annotated[OpenEvent | WriteCloseEvent | ExecEvent | CallEvent | ExitEvent, Field(discriminator="kind")]


class CommandEvidence(BaseModel):
    """One executed command: where it is in the trajectory, how it ended, and what it did."""

    model_config = ConfigDict(extra="ignore")
    step: int = Field(ge=0, description="index into Trajectory.steps of the turn that ran it")
    message_index: int = Field(ge=0, description="index into Trajectory.messages of the assistant message")
    command: str
    exit_code: int | None
    timed_out: bool = False
    events: list[Event] = Field(default_factory=list)
    truncated: bool = Field(False, description="events past MAX_EVENTS_PER_COMMAND were dropped")
    recorder: str = Field("", description="what recorded it: e.g. `python-audit+ldpreload`, or `none` (no "
                          "evidence could be collected for this command; detectors fall back to reading text)")


def read_evidence(path: Path) -> list[CommandEvidence] | None:
    """A trial's evidence, or None when the trial was recorded without it (older runs, imported
    transcripts): detectors then fall back to reading the commands' text."""
    if not path.is_file():
        return None
    return list(_lines(path))


def _lines(path: Path) -> Iterator[CommandEvidence]:
    from unscaffold.errors import UnscaffoldError

    with path.open(encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield CommandEvidence.model_validate_json(line)
            except ValueError as e:
                first = str(e).splitlines()[0] if str(e) else type(e).__name__
                raise UnscaffoldError(f"{path}: line {number}: {first}") from None
