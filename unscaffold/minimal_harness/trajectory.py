"""The student-visible trajectory: what the student saw and did, saved after every step."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from unscaffold.iojson import load_model, write_json_atomic
from unscaffold.llm.types import Message, Usage

ExitStatus = Literal["running", "submitted", "turn_limit", "wall_limit", "cost_limit", "format_errors",
                     "resource_limit", "error"]


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class StepRecord(BaseModel):
    """Facts about one assistant turn that are not part of the chat rows."""

    turn: int
    message_index: int
    started_at: str
    model_s: float = 0.0
    exec_s: float = 0.0
    usage: Usage = Field(default_factory=Usage)
    replaced: bool = False
    command: str | None = Field(None, description="what actually ran (audited against the visible call)")
    exit_code: int | None = None
    timed_out: bool = False
    format_error: str | None = None


class Trajectory(BaseModel):
    trial_id: str
    task_id: str
    suite: str
    student: str
    harness: str = "minimal"
    tools: list[dict[str, Any]]
    messages: list[Message] = Field(default_factory=list)
    opening_messages: int = Field(0, ge=0, description="leading messages (system prompt included) the suite "
                                  "wrote before the student's first turn; assistant turns among them are a "
                                  "worked example: context, never the student's")
    steps: list[StepRecord] = Field(default_factory=list)
    exit_status: ExitStatus = "running"
    final_answer: str | None = None
    exception: str | None = None
    exit_message: str | None = Field(None, description="why the episode ended, in a sentence")
    usage: Usage = Field(default_factory=Usage)
    started_at: str = Field(default_factory=now_iso)
    ended_at: str | None = None
    wall_s: float = 0.0

    def save(self, path: Path) -> None:
        """Called after every step: atomic, without fsync (result.json, written last, is durable)."""
        write_json_atomic(path, self, durable=False)

    @classmethod
    def load(cls, path: Path) -> Trajectory:
        return load_model(path, cls)


class TrajectoryWriter:
    """Saves a trajectory after every step without putting the write on the step's critical path.

    `submit` takes a snapshot (new lists of the append-only messages and steps) and a writer thread
    writes the newest one atomically; a snapshot not yet written is replaced by a newer one. Writes are
    at least `interval_s` apart: each rewrites the whole file, so one per step would cost a trial of
    n steps O(n^2) serialising (an unfinished trial is run again from its start, so nothing relies on
    the file being current mid-trial). `close` writes the last snapshot before returning, so the file
    on disk always ends complete and current."""

    interval_s = 1.0

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cond = threading.Condition()
        self._pending: Trajectory | None = None
        self._closed = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name=f"save {path.parent.name}", daemon=True)
        self._thread.start()

    def submit(self, traj: Trajectory) -> None:
        snapshot = traj.model_copy(update={"messages": list(traj.messages), "steps": list(traj.steps)})
        with self._cond:
            self._raise()
            self._pending = snapshot
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join()
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._closed:
                    self._cond.wait()
                snapshot, self._pending = self._pending, None
                if snapshot is None:
                    return
            try:
                snapshot.save(self.path)
            except BaseException as e:  # surfaced to the agent on its next submit or close
                with self._cond:
                    self._error = e
            with self._cond:  # then wait out the interval, unless the trial ends first
                self._cond.wait_for(lambda: self._closed, timeout=self.interval_s)
