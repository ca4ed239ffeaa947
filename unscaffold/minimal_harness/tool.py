"""The one deployment tool, `execute`, and the check that a proposal uses it correctly."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any, Final

from unscaffold.llm.types import AssistantResponse

TOOL_NAME: Final = "execute"

EXECUTE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Run one bash command in a fresh shell in the workspace root and return its combined "
            "stdout and stderr followed by [exit_code=N]. Files persist between calls; the working "
            "directory and environment variables do not."
        ),
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The bash command to run."}},
            "required": ["command"],
        },
    },
}


@functools.cache
def system_prompt() -> str:
    """Read once per process: every trial opens with it."""
    return resources.files("unscaffold.minimal_harness").joinpath("system_prompt.md").read_text("utf-8").strip()


def format_problem(response: AssistantResponse, allowed: tuple[str, ...] = (TOOL_NAME,)) -> str | None:
    """Why a response that calls tools is malformed, or None when it is one well-formed call."""
    calls = response.tool_calls
    if len(calls) > 1:
        return f"Format error: make exactly one tool call per reply (got {len(calls)})."
    call = calls[0]
    if call.name not in allowed:
        names = ", ".join(f"`{n}`" for n in allowed)
        return f"Format error: unknown tool `{call.name}`; the available tools are {names}."
    if call.arguments is None:
        return "Format error: the tool arguments are not a JSON object."
    if call.name == TOOL_NAME:
        command = call.arguments.get("command")
        extra = sorted(set(call.arguments) - {"command"})
        if not isinstance(command, str) or not command.strip():
            return "Format error: `execute` needs one non-empty string argument `command`."
        if extra:
            return f"Format error: `execute` takes only `command` (got also {', '.join(extra)})."
    return None
