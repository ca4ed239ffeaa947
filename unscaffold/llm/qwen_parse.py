"""Parse raw Qwen generations (Qwen3 JSON and Qwen3.5 / Qwen3-Coder XML tool calls) into a response.

A local HF model returns text, not structured calls, so we recover what the chat template would
have rendered: an optional `<think>` block (often already opened by the generation prompt, so the
text starts inside it), free text, and `<tool_call>` blocks in either format. Malformed calls are
kept (arguments None, raw text kept) so the harness can answer with a format error instead of
silently dropping the model's attempt.
"""

from __future__ import annotations

import json
import re
from typing import Any

from unscaffold.llm.json_bounds import loads_bounded
from unscaffold.llm.types import AssistantResponse, ToolCall, parse_arguments

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
FUNCTION_OPEN, FUNCTION_CLOSE = "<function=", "</function>"
PARAM_OPEN, PARAM_CLOSE = "<parameter=", "</parameter>"
END_TOKENS = ("<|im_end|>", "<|endoftext|>")

_NAME_IN_JSON = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_FUNCTION_HEAD = re.compile(r"<function=([^>\n]*)>")
_PARAM_HEAD = re.compile(r"<parameter=([^>\n]*)>")


def parse_completion(
    text: str,
    *,
    in_think: bool = False,
    tools: list[dict[str, Any]] | None = None,
    id_prefix: str = "call_",
) -> AssistantResponse:
    """Split one generated assistant turn into reasoning, content and tool calls.

    `in_think`: the prompt ended inside an opened `<think>` block, so text before the first
    `<tool_call>` counts as reasoning even when the model never closed the block (truncated).
    `tools`: JSON schemas used to type XML parameter values; untyped or string parameters stay
    strings (so a command such as `true` or `42` is not turned into a JSON literal).
    Usage is left at zero; the backend fills it in.
    """
    text = strip_end_tokens(text)
    reasoning, rest = _split_reasoning(text, in_think)
    spans = _call_spans(rest)
    types = _parameter_types(tools)
    calls = [_parse_call(f"{id_prefix}{i}", rest[a:b], types) for i, (_, _, a, b) in enumerate(spans)]
    pieces, pos = [], 0
    for start, end, _, _ in spans:
        pieces.append(rest[pos:start])
        pos = end
    pieces.append(rest[pos:])
    content = "".join(pieces).strip()
    return AssistantResponse(reasoning=reasoning or None, content=content or None, tool_calls=calls)


def strip_end_tokens(text: str) -> str:
    """Cut the text at the first end-of-turn token; generation stops there anyway."""
    cut = len(text)
    for token in END_TOKENS:
        at = text.find(token)
        if at != -1:
            cut = min(cut, at)
    return text[:cut]


def _split_reasoning(text: str, in_think: bool) -> tuple[str | None, str]:
    stripped = text.lstrip()
    opened = stripped.startswith(THINK_OPEN)
    if opened:
        text = stripped[len(THINK_OPEN) :]
    close = text.find(THINK_CLOSE)
    if close != -1:
        return text[:close].strip(), text[close + len(THINK_CLOSE) :]
    if opened or in_think:  # never closed: reasoning runs up to the first tool call, if any
        first = _first_call_start(text)
        return text[:first].strip(), text[first:]
    return None, text


def _first_call_start(text: str) -> int:
    at = text.find(CALL_OPEN)
    if at == -1:
        at = text.find(FUNCTION_OPEN)
    return len(text) if at == -1 else at


def _call_spans(text: str) -> list[tuple[int, int, int, int]]:
    """(block start, block end, inner start, inner end) of each tool call, tolerating missing closers."""
    spans: list[tuple[int, int, int, int]] = []
    if CALL_OPEN in text:
        pos = 0
        while (start := text.find(CALL_OPEN, pos)) != -1:
            inner = start + len(CALL_OPEN)
            close = text.find(CALL_CLOSE, inner)
            nxt = text.find(CALL_OPEN, inner)
            if close != -1 and (nxt == -1 or close < nxt):
                spans.append((start, close + len(CALL_CLOSE), inner, close))
                pos = close + len(CALL_CLOSE)
            else:  # missing </tool_call>: the call runs to the next one or to the end
                end = len(text) if nxt == -1 else nxt
                spans.append((start, end, inner, end))
                pos = end
        return spans
    # Qwen3-Coder models sometimes drop the <tool_call> wrapper and emit bare <function=...> blocks.
    pos = 0
    while (start := text.find(FUNCTION_OPEN, pos)) != -1:
        close = text.find(FUNCTION_CLOSE, start)
        nxt = text.find(FUNCTION_OPEN, start + 1)
        if close != -1 and (nxt == -1 or close < nxt):
            end = close + len(FUNCTION_CLOSE)
        else:
            end = len(text) if nxt == -1 else nxt
        spans.append((start, end, start, end))
        pos = end
    return spans


def _parse_call(call_id: str, inner: str, types: dict[str, dict[str, Any]]) -> ToolCall:
    body = inner.strip()
    if body.startswith(FUNCTION_OPEN):
        return _parse_xml_call(call_id, body, types)
    return _parse_json_call(call_id, body)


def _parse_json_call(call_id: str, body: str) -> ToolCall:
    """Qwen3 / Hermes: `{"name": ..., "arguments": {...}}`; arguments may also arrive as a JSON string."""
    try:
        value = loads_bounded(body)
    except ValueError:  # not JSON, or nested too deep
        value = None
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        args = value.get("arguments", value.get("parameters"))
        if args is None or isinstance(args, dict | str):
            return parse_arguments(call_id, value["name"], args)
        return ToolCall(id=call_id, name=value["name"], arguments=None, raw_arguments=json.dumps(args))
    match = _NAME_IN_JSON.search(body)
    name = match.group(1) if match else ""
    return ToolCall(id=call_id, name=name, arguments=None, raw_arguments=body)


def _parse_xml_call(call_id: str, body: str, types: dict[str, dict[str, Any]]) -> ToolCall:
    """Qwen3.5 / Qwen3-Coder: `<function=NAME>` then `<parameter=KEY>\\nVALUE\\n</parameter>` blocks."""
    head = _FUNCTION_HEAD.match(body)
    if head is None:
        return ToolCall(id=call_id, name="", arguments=None, raw_arguments=body)
    name = head.group(1).strip()
    rest = body[head.end() :]
    close = rest.find(FUNCTION_CLOSE)
    if close != -1:
        rest = rest[:close]
    schema = types.get(name, {})
    arguments: dict[str, Any] = {}
    pos = 0
    while (param := _PARAM_HEAD.search(rest, pos)) is not None:
        start = param.end()
        end = rest.find(PARAM_CLOSE, start)
        nxt = _PARAM_HEAD.search(rest, start)
        if end != -1 and (nxt is None or end < nxt.start()):
            pos = end + len(PARAM_CLOSE)
        else:  # missing </parameter>: the value runs to the next parameter or the end
            end = len(rest) if nxt is None else nxt.start()
            pos = end
        key = param.group(1).strip()
        arguments[key] = _convert(_strip_one_newline(rest[start:end]), schema.get(key))
    return ToolCall(id=call_id, name=name, arguments=arguments)


def _strip_one_newline(value: str) -> str:
    """The template wraps each value in exactly one newline on each side; more belongs to the value."""
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def _convert(value: str, kind: Any) -> Any:
    """Type a parameter value by its schema; strings (and untyped values) stay verbatim."""
    kinds = kind if isinstance(kind, list) else [kind]
    if None in kinds or "string" in kinds:
        return value
    try:
        return loads_bounded(value)
    except ValueError:
        pass
    literals = {"True": True, "False": False, "None": None}  # the template writes Python's str() of scalars
    return literals.get(value.strip(), value)


def _parameter_types(tools: list[dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    types: dict[str, dict[str, Any]] = {}
    for tool in tools or []:
        fn = tool.get("function", tool)
        props = (fn.get("parameters") or {}).get("properties") or {}
        types[fn.get("name", "")] = {
            key: spec["type"] for key, spec in props.items() if isinstance(spec, dict) and "type" in spec
        }
    return types
