"""The small protocols every backend implements."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from unscaffold.llm.types import AssistantResponse, Message


@runtime_checkable
class Model(Protocol):
    """Answers a transcript with one assistant response; raises ModelError subclasses on failure."""

    spec: str

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> AssistantResponse: ...


class ModelProvider(Protocol):
    """Hands each trial its own model: stateless backends return themselves, replay a fresh cursor."""

    spec: str

    def for_trial(self, task_id: str) -> Model: ...
