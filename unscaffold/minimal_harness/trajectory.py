"""The student-visible trajectory: what the student saw and did, saved after every step."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from unscaffold.iojson import load_model, write_json_atomic
from unscaffold.llm.types import Message, Usage

ExitStatus = Literal["running", "submitted", "turn_limit", "wall_limit", "cost_limit", "format_errors", "error"]


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
    steps: list[StepRecord] = Field(default_factory=list)
    exit_status: ExitStatus = "running"
    final_answer: str | None = None
    exception: str | None = None
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
