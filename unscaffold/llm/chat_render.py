"""Rendering a transcript with a checkpoint's own chat template, shared by generation and training.

`hf:` generation and SFT must see the same text and the same token ids for the same context, so both
go through these functions instead of each calling `apply_chat_template` its own way."""

from __future__ import annotations

from typing import Any

from unscaffold.llm.json_bounds import loads_bounded
from unscaffold.llm.types import Message

END_OF_TURN = "<|im_end|>"  # where a Qwen assistant turn ends: generation stops here, training trains it


def template_row(message: Message) -> dict[str, Any]:
    """Chat templates want tool-call arguments as a mapping; a JSON string that decodes to one is decoded."""
    row = message.chat_dict()
    for call in row.get("tool_calls") or []:
        args = call["function"].get("arguments")
        if isinstance(args, str):
            try:
                value = loads_bounded(args)
            except ValueError:  # not JSON, or nested too deep: rendered as the text it is
                continue
            if isinstance(value, dict):
                call["function"]["arguments"] = value
    return row


def render_chat(tokenizer: Any, messages: list[Message], tools: list[dict[str, Any]] | None, *,
                add_generation_prompt: bool) -> str:
    """The template's text for `messages`; with `add_generation_prompt` exactly what generation continues."""
    rows = [template_row(m) for m in messages]
    try:
        return _apply(tokenizer, rows, tools, add_generation_prompt)
    except TypeError:
        # Templates that iterate `arguments|items` (Qwen3.5) cannot render a malformed call kept as
        # a raw string; render those calls without arguments rather than failing.
        return _apply(tokenizer, [_drop_string_arguments(r) for r in rows], tools, add_generation_prompt)


def encode(tokenizer: Any, text: str) -> list[int]:
    """Token ids of rendered text: the template already wrote every special token, so none are added."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _apply(tokenizer: Any, rows: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
           add_generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(rows, tools=tools or None, add_generation_prompt=add_generation_prompt,
                                         tokenize=False)


def _drop_string_arguments(row: dict[str, Any]) -> dict[str, Any]:
    calls = row.get("tool_calls")
    if not calls:
        return row
    fixed = []
    for call in calls:
        fn = dict(call["function"])
        if not isinstance(fn.get("arguments"), dict):
            fn["arguments"] = {}
        fixed.append({**call, "function": fn})
    return {**row, "tool_calls": fixed}
