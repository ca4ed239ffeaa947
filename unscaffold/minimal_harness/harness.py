"""What a harness decides: the tools offered, the system prompt, how a call runs, whether a finish stands.

The minimal harness h is the deployment one; h* (knowledge/hstar.py) adds tools, checks, skills, memory."""

from __future__ import annotations

from typing import Any, Protocol

from unscaffold.llm.types import AssistantResponse, Message, ToolCall
from unscaffold.minimal_harness.sandbox.base import Sandbox
from unscaffold.minimal_harness.sandbox.result import ExecResult
from unscaffold.minimal_harness.tool import EXECUTE_TOOL, TOOL_NAME, system_prompt


class Harness(Protocol):
    name: str

    def tools(self) -> list[dict[str, Any]]: ...

    def system_prompt(self) -> str: ...

    def tool_names(self) -> tuple[str, ...]: ...

    def run_call(self, call: ToolCall, sandbox: Sandbox, timeout_s: float, transcript: list[Message]) -> ExecResult:
        """Run one well-formed call and return what the student will see."""
        ...

    def before_finish(self, response: AssistantResponse, sandbox: Sandbox, transcript: list[Message]) -> str | None:
        """A message that sends the student back to work, or None to let the episode end."""
        ...


class MinimalHarness:
    name = "minimal"

    def tools(self) -> list[dict[str, Any]]:
        return [EXECUTE_TOOL]

    def system_prompt(self) -> str:
        return system_prompt()

    def tool_names(self) -> tuple[str, ...]:
        return (TOOL_NAME,)

    def run_call(self, call: ToolCall, sandbox: Sandbox, timeout_s: float, transcript: list[Message]) -> ExecResult:
        assert call.arguments is not None
        return sandbox.execute(call.arguments["command"], timeout_s=timeout_s)

    def before_finish(self, response: AssistantResponse, sandbox: Sandbox, transcript: list[Message]) -> str | None:
        return None
