"""`replay:FILE`: recorded responses per task, used in order. For tests, debugging and load tests."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unscaffold.errors import InputError, ReplayExhausted
from unscaffold.iojson import read_json, validation_error
from unscaffold.llm.types import AssistantResponse, Message, Usage, parse_arguments


class ReplayToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class ReplayStudentEntry(BaseModel):
    """One recorded assistant response. `tool_calls` (several) exists to exercise format errors."""

    model_config = ConfigDict(extra="forbid")
    reasoning: str | None = None
    content: str | None = None
    tool_call: ReplayToolCall | None = None
    tool_calls: list[ReplayToolCall] | None = None

    def to_response(self, step: int) -> AssistantResponse:
        calls = [self.tool_call] if self.tool_call else list(self.tool_calls or [])
        return AssistantResponse(
            reasoning=self.reasoning,
            content=self.content,
            tool_calls=[parse_arguments(f"call_{step}_{i}", c.name, c.arguments) for i, c in enumerate(calls)],
            usage=Usage(),
        )


class ReplayFile:
    """A parsed replay file: task id (or "*") -> list of raw entries.

    An entry is an object, or (for reviewers) a string: raw text an LLM produced, kept to replay unparsable output."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        data = read_json(self.path)
        if not isinstance(data, dict):
            raise InputError(str(self.path), None, "a replay file is a JSON object: task id -> list of entries")
        self.entries: dict[str, list[dict[str, Any] | str]] = {}
        for key, value in data.items():
            if not isinstance(value, list):
                raise InputError(str(self.path), key, "expected a list of entries")
            for i, entry in enumerate(value):
                if not isinstance(entry, dict | str):
                    raise InputError(str(self.path), f"{key}[{i}]", "expected an object or a string")
            self.entries[key] = value

    def for_task(self, task_id: str) -> list[dict[str, Any] | str]:
        if task_id in self.entries:
            return self.entries[task_id]
        if "*" in self.entries:
            return self.entries["*"]
        raise ReplayExhausted(f"{self.path}: no entries for task {task_id!r} and no '*' entry")

    def validate_student(self) -> None:
        for key, entries in self.entries.items():
            for i, entry in enumerate(entries):
                if not isinstance(entry, dict):
                    raise InputError(str(self.path), f"{key}[{i}]", "expected an object")
                try:
                    ReplayStudentEntry.model_validate(entry)
                except ValidationError as e:
                    raise validation_error(str(self.path), e, prefix=f"{key}[{i}]") from None


class ReplayCursor:
    """Walks one task's entries in order for one trial."""

    def __init__(self, file: ReplayFile, task_id: str, latency_s: float = 0.0) -> None:
        self.file, self.task_id, self.latency_s = file, task_id, latency_s
        self._lock = threading.Lock()
        self.position = 0

    def next_entry(self) -> dict[str, Any] | str:
        entries = self.file.for_task(self.task_id)
        with self._lock:
            if self.position >= len(entries):
                raise ReplayExhausted(
                    f"{self.file.path}: task {self.task_id!r} has no entry left after {len(entries)}"
                )
            entry = entries[self.position]
            self.position += 1
        if self.latency_s:
            time.sleep(self.latency_s)
        return entry


class ReplayModel:
    def __init__(self, spec: str, cursor: ReplayCursor) -> None:
        self.spec, self.cursor = spec, cursor

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> AssistantResponse:
        step = self.cursor.position
        entry = ReplayStudentEntry.model_validate(self.cursor.next_entry())
        return entry.to_response(step)


class ReplayProvider:
    def __init__(self, spec: str, path: Path, latency_s: float = 0.0) -> None:
        self.spec, self.latency_s = spec, latency_s
        self.file = ReplayFile(path)
        self.file.validate_student()

    def for_trial(self, task_id: str) -> ReplayModel:
        return ReplayModel(self.spec, ReplayCursor(self.file, task_id, self.latency_s))
