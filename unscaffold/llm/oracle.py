"""`oracle`: a student that runs the task's reference solution through `execute`, then finishes.

It validates an environment end to end: every suite must score 100% with it."""

from __future__ import annotations

from typing import Any

from unscaffold.llm.types import AssistantResponse, Message, ToolCall


class OracleModel:
    spec = "oracle"

    def __init__(self, commands: list[str]) -> None:
        self.commands = list(commands)
        self.position = 0

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> AssistantResponse:
        if self.position < len(self.commands):
            command = self.commands[self.position]
            self.position += 1
            return AssistantResponse(
                tool_calls=[ToolCall(id=f"oracle_{self.position}", name="execute", arguments={"command": command})]
            )
        return AssistantResponse(content="Reference solution applied.")


class OracleProvider:
    """Needs the suite to turn a task into its reference commands."""

    spec = "oracle"

    def __init__(self, commands_for: Any) -> None:
        self.commands_for = commands_for

    def for_trial(self, task_id: str) -> OracleModel:
        return OracleModel(self.commands_for(task_id))
