"""`openai:MODEL[@BASE_URL]`: chat completions with native tool calls (OpenAI, vLLM, SGLang, ...)."""

from __future__ import annotations

import json
import os
from typing import Any, Unpack

import openai

from unscaffold.errors import AuthError, ModelError
from unscaffold.llm.hosted import Endpoint, HostedModel
from unscaffold.llm.http_errors import sdk_errors
from unscaffold.llm.types import AssistantResponse, Message, ServerKind, ToolCall, Usage, parse_arguments

# The field each server reads an earlier turn's reasoning from, to hand to the chat template. vLLM reads only
# `reasoning` and silently drops `reasoning_content` (vllm-project/vllm#38488); SGLang reads
# `reasoning_content`. A server of unknown kind gets both, so neither kind renders an empty `<think>`.
REASONING_FIELDS: dict[ServerKind | None, tuple[str, ...]] = {
    "vllm": ("reasoning",), "sglang": ("reasoning_content",), None: ("reasoning", "reasoning_content")}


def wire_message(message: Message, *, reasoning: bool = True, server: ServerKind | None = None) -> dict[str, Any]:
    """One row as the chat completions API takes it: arguments as JSON text, and earlier reasoning in the
    field the server reads (`REASONING_FIELDS`), so a served model sees its past turns as training rendered
    them (`<think>` with the reasoning, not an empty one). `reasoning=False` for OpenAI's own API, which
    keeps reasoning server-side and takes no such field."""
    row = message.chat_dict()
    thought = row.pop("reasoning_content", None)
    if reasoning and message.role == "assistant" and thought is not None:
        for key in REASONING_FIELDS[server]:
            row[key] = thought
    for call in row.get("tool_calls") or []:
        args = call["function"]["arguments"]
        if not isinstance(args, str):
            call["function"]["arguments"] = json.dumps(args, ensure_ascii=False)
    return row


def _reasoning(message: Any) -> str | None:
    """vLLM and SGLang return thinking as `reasoning_content` (older) or `reasoning` (newer)."""
    extra = getattr(message, "model_extra", None) or {}
    for key in ("reasoning_content", "reasoning"):
        value = extra.get(key) or getattr(message, key, None)
        if isinstance(value, str) and value:
            return value
    return None


def _tool_call(index: int, call: Any) -> ToolCall:
    function = getattr(call, "function", None)
    call_id = getattr(call, "id", None) or f"call_{index}"
    if function is None:  # a non-function ("custom") tool call; we only offer function tools
        custom = getattr(call, "custom", None)
        return parse_arguments(call_id, getattr(custom, "name", ""), getattr(custom, "input", None))
    return parse_arguments(call_id, function.name, function.arguments)


def parse_completion(completion: Any, where: str) -> AssistantResponse:
    """The first choice as our response type; malformed tool arguments stay as raw text."""
    choices = getattr(completion, "choices", None)
    if not choices:
        raise ModelError(f"{where}: the server answered without choices")
    message = choices[0].message
    usage = getattr(completion, "usage", None)
    return AssistantResponse(
        reasoning=_reasoning(message),
        content=message.content,
        tool_calls=[_tool_call(i, c) for i, c in enumerate(message.tool_calls or [])],
        usage=Usage(
            input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            output_tokens=getattr(usage, "completion_tokens", 0) or 0,
        ),
    )


class OpenAIModel(HostedModel):
    """A chat-completions backend."""

    def __init__(self, spec: str, model: str, *, send_reasoning: bool | None = None,
                 server: ServerKind | None = None, **endpoint: Unpack[Endpoint]) -> None:
        """`send_reasoning`: send earlier reasoning back (default: for a server given by URL, vLLM or SGLang).
        `server`: the server's kind when known (`?server=vllm|sglang` in the spec): its reasoning field only."""
        super().__init__(spec, model, endpoint)
        self.server = server
        self.send_reasoning = self.served_at is not None if send_reasoning is None else send_reasoning

    def connect(self, base_url: str | None, api_key: str | None, timeout_s: float) -> openai.OpenAI:
        base_url = self.served_at = base_url or os.environ.get("OPENAI_BASE_URL") or None
        # Self-hosted servers (vLLM, SGLang) usually accept any key; the SDK still wants one.
        key = api_key or os.environ.get("OPENAI_API_KEY") or ("EMPTY" if base_url else None)
        if not key:
            raise AuthError(f"{self.spec}: set OPENAI_API_KEY, or give a server as openai:MODEL@BASE_URL")
        return openai.OpenAI(api_key=key, base_url=base_url, timeout=timeout_s, max_retries=0)

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> AssistantResponse:
        """One completion; transient failures are retried, context and auth failures raised at once."""
        request: dict[str, Any] = {"model": self.model, "messages": self.wire_messages(messages)}
        if tools:
            request["tools"] = tools
        request.update(self.sampling.given())  # temperature, top_p, max_tokens, seed: the API's own names
        return self.backoff.call(lambda: self._call(request))

    def wire_messages(self, messages: list[Message]) -> list[dict[str, Any]]:
        """The `messages` of the request body for this transcript."""
        return [wire_message(m, reasoning=self.send_reasoning, server=self.server) for m in messages]

    def _call(self, request: dict[str, Any]) -> AssistantResponse:
        with sdk_errors(self.spec, openai, openai.OpenAIError, "code"):
            completion = self.client.chat.completions.create(**request)
        return parse_completion(completion, self.spec)
