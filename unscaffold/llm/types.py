"""Chat rows in the OpenAI shape (what chat templates and TRL read) and the assistant response."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from unscaffold.llm.json_bounds import loads_bounded

ServerKind = Literal["vllm", "sglang"]  # an OpenAI-compatible server whose reasoning field is known

class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )


class ToolCall(BaseModel):
    """A tool call as the model made it; `arguments` is None when its JSON did not parse."""

    id: str
    name: str
    arguments: dict[str, Any] | None = None
    raw_arguments: str | None = None


class FunctionCall(BaseModel):
    name: str
    arguments: dict[str, Any] | str


class ChatToolCall(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(BaseModel):
    """One chat row. `provider_data` carries backend state (e.g. thinking signatures), never trained on."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    reasoning_content: str | None = None
    tool_calls: list[ChatToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    provider_data: dict[str, Any] | None = None

    def chat_dict(self) -> dict[str, Any]:
        """The row as chat templates and OpenAI-style APIs expect it (no provider state)."""
        return self.model_dump(exclude_none=True, exclude={"provider_data"})


class AssistantResponse(BaseModel):
    reasoning: str | None = None
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    provider_data: dict[str, Any] = Field(default_factory=dict)

    def to_message(self) -> Message:
        calls = None
        if self.tool_calls:
            calls = [
                ChatToolCall(
                    id=c.id,
                    function=FunctionCall(
                        name=c.name,
                        arguments=c.arguments if c.arguments is not None else (c.raw_arguments or ""),
                    ),
                )
                for c in self.tool_calls
            ]
        return Message(
            role="assistant",
            content=self.content or "",
            reasoning_content=self.reasoning or None,
            tool_calls=calls,
            provider_data=self.provider_data or None,
        )


def parse_arguments(call_id: str, name: str, raw: str | dict[str, Any] | None) -> ToolCall:
    """Keep a malformed argument string as text so the harness can answer with a format error."""
    if isinstance(raw, dict):
        return ToolCall(id=call_id, name=name, arguments=raw)
    if raw is None or raw == "":
        return ToolCall(id=call_id, name=name, arguments={})
    try:
        value = loads_bounded(raw)
    except ValueError:  # not JSON, or nested too deep (the agent answers with a format error)
        return ToolCall(id=call_id, name=name, arguments=None, raw_arguments=raw)
    if not isinstance(value, dict):
        return ToolCall(id=call_id, name=name, arguments=None, raw_arguments=raw)
    return ToolCall(id=call_id, name=name, arguments=value)


def assistant_calls(messages: list[Message]) -> list[FunctionCall]:
    """Every call the assistant itself made, in order (never text it only read in a tool result)."""
    return [c.function for m in messages if m.role == "assistant" for c in m.tool_calls or ()]


def command_of(call: FunctionCall) -> str | None:
    """The command of a well-formed `execute` call."""
    args = call.arguments
    if call.name == "execute" and isinstance(args, dict) and isinstance(args.get("command"), str):
        return args["command"]
    return None
