"""`anthropic:MODEL`: the Messages API, with thinking blocks kept so tool turns can be continued."""

from __future__ import annotations

import os
from typing import Any, Unpack

import anthropic

from unscaffold.errors import AuthError, InputError
from unscaffold.llm.hosted import Endpoint, HostedModel
from unscaffold.llm.http_errors import one_line, sdk_errors
from unscaffold.llm.types import AssistantResponse, Message, ToolCall, Usage, parse_arguments

THINKING_ENV = "UNSCAFFOLD_ANTHROPIC_THINKING"
# Room for the visible answer on top of the thinking budget, which max_tokens must exceed.
ANSWER_HEADROOM_TOKENS = 4096


def sdk_sampling() -> set[str]:
    """The sampling settings the installed SDK's `messages.create` takes (recent SDKs take none of
    temperature, top_p or seed; max_tokens is always required)."""
    import inspect

    taken = set(inspect.signature(anthropic.resources.messages.Messages.create).parameters)
    return {name for name in ("temperature", "top_p", "seed") if name in taken} | {"max_tokens"}


def thinking_budget_from_env() -> int | None:
    """Extended thinking is opt-in; the variable holds a token budget, and 0 or unset means off."""
    raw = os.environ.get(THINKING_ENV, "").strip()
    if not raw:
        return None
    try:
        budget = int(raw)
    except ValueError:
        raise InputError(THINKING_ENV, None, f"expected a number of tokens, got {raw!r}") from None
    if budget < 0:
        raise InputError(THINKING_ENV, None, f"expected a number of tokens >= 0, got {budget}")
    return budget or None


def convert_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI function schemas (what the harness declares) -> Anthropic tool definitions."""
    out = []
    for tool in tools:
        fn = tool.get("function", tool)
        entry: dict[str, Any] = {
            "name": fn["name"],
            "input_schema": fn.get("parameters") or {"type": "object", "properties": {}},
        }
        if fn.get("description"):
            entry["description"] = fn["description"]
        out.append(entry)
    return out


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    data = message.provider_data or {}
    blocks: list[dict[str, Any]] = []
    signature = data.get("thinking_signature")
    if signature and message.reasoning_content:
        blocks.append({"type": "thinking", "thinking": message.reasoning_content, "signature": signature})
    for redacted in data.get("redacted_thinking") or []:
        blocks.append({"type": "redacted_thinking", "data": redacted})
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls or []:
        parsed = parse_arguments(call.id, call.function.name, call.function.arguments)
        # A malformed call from another model's transcript still needs an object as input.
        args = parsed.arguments if parsed.arguments is not None else {"raw_arguments": parsed.raw_arguments}
        blocks.append({"type": "tool_use", "id": call.id, "name": call.function.name, "input": args})
    return blocks


def thinking_can_continue(messages: list[Message]) -> bool:
    """With thinking on, the API wants the last assistant turn of an unfinished tool loop to open with its
    signed thinking block. A turn written elsewhere (a reviewer's replacement, another model) has none and
    no signature can be made for it, so such a request goes without thinking, which the API accepts."""
    for message in reversed(messages):
        if message.role == "user":
            return True
        if message.role == "assistant":
            data = message.provider_data or {}
            return bool((data.get("thinking_signature") and message.reasoning_content) or data.get("redacted_thinking"))
    return True


def convert_messages(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """Chat rows -> (system prompt, turns); tool results become tool_result blocks in a user turn."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            if message.content:
                system.append(message.content)
            continue
        if message.role == "assistant":
            role, blocks = "assistant", _assistant_blocks(message)
        elif message.role == "tool":
            role = "user"
            call_id = message.tool_call_id or ""
            blocks = [{"type": "tool_result", "tool_use_id": call_id, "content": message.content}]
        else:
            role = "user"
            blocks = [{"type": "text", "text": message.content}] if message.content else []
        if not blocks:
            continue
        # The API wants alternating turns: merge results of parallel calls (and what follows) into one.
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return "\n\n".join(system), turns


def parse_message(response: Any) -> AssistantResponse:
    """Response blocks -> our response; the thinking signature goes to provider_data for the next turn."""
    reasoning: list[str] = []
    text: list[str] = []
    calls: list[ToolCall] = []
    provider_data: dict[str, Any] = {}
    for block in response.content or []:
        kind = getattr(block, "type", None)
        if kind == "thinking":
            reasoning.append(block.thinking)
            if getattr(block, "signature", None):
                provider_data["thinking_signature"] = block.signature
        elif kind == "redacted_thinking":
            provider_data.setdefault("redacted_thinking", []).append(block.data)
        elif kind == "text":
            text.append(block.text)
        elif kind == "tool_use":
            calls.append(parse_arguments(block.id, block.name, block.input))
    usage = getattr(response, "usage", None)
    input_tokens = sum(
        getattr(usage, field, 0) or 0
        for field in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    return AssistantResponse(
        reasoning="\n\n".join(reasoning) or None,
        content="".join(text) or None,
        tool_calls=calls,
        usage=Usage(input_tokens=input_tokens, output_tokens=getattr(usage, "output_tokens", 0) or 0),
        provider_data=provider_data,
    )


class AnthropicModel(HostedModel):
    """A Messages API backend."""

    def __init__(self, spec: str, model: str, *, max_tokens: int = 8192, thinking_budget: int | None = None,
                 **endpoint: Unpack[Endpoint]) -> None:
        super().__init__(spec, model, endpoint)
        self.max_tokens = self.sampling.max_tokens or max_tokens
        self.thinking_budget = thinking_budget if thinking_budget is not None else thinking_budget_from_env()

    def connect(self, base_url: str | None, api_key: str | None, timeout_s: float) -> anthropic.Anthropic:
        # api_key None lets the SDK read ANTHROPIC_API_KEY; base_url None lets it read ANTHROPIC_BASE_URL.
        return anthropic.Anthropic(api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0)

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> AssistantResponse:
        """One turn; transient failures are retried, context and auth failures raised at once."""
        system, turns = convert_messages(messages)
        request: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "messages": turns}
        if system:
            request["system"] = system
        if tools:
            request["tools"] = convert_tools(tools)
        if self.thinking_budget and thinking_can_continue(messages):
            request["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
            request["max_tokens"] = max(self.max_tokens, self.thinking_budget + ANSWER_HEADROOM_TOKENS)
        elif not self.thinking_budget:  # temperature and top_p are refused together with thinking
            request.update(self.sampling.model_dump(include={"temperature", "top_p"} & sdk_sampling(),
                                                    exclude_none=True))
        return self.backoff.call(lambda: self._call(request))

    def _call(self, request: dict[str, Any]) -> AssistantResponse:
        try:
            with sdk_errors(self.spec, anthropic, anthropic.AnthropicError, "error_code"):
                response = self.client.messages.create(**request)
        except TypeError as e:  # how the SDK says no credentials were found (env, profile or argument)
            if "authentication" not in str(e):
                raise
            raise AuthError(f"{self.spec}: set ANTHROPIC_API_KEY ({one_line(str(e))})") from e
        return parse_message(response)
