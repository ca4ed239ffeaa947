"""Model and reviewer output as hostile input: text that cannot be encoded, structures nested too deep.

A model can emit a lone surrogate (`\\udfff`, which JSON's `\\u` escapes let through but UTF-8 cannot
encode) or tool-call arguments nested hundreds of levels deep (past what the JSON writers recurse
through). Either would make saving the trajectory raise and take the run down with it. So output is
checked where it enters: a problem becomes that turn's format error, and what is kept of the reply is
repaired (the surrogate becomes U+FFFD, the too-deep arguments stay as their raw text) so every record
of the trial can still be written."""

from __future__ import annotations

import json
from typing import Any

from unscaffold.llm.json_bounds import MAX_DEPTH, repair_text, repair_value, text_depth, value_depth, value_problem
from unscaffold.llm.types import AssistantResponse


def response_problem(response: AssistantResponse) -> str | None:
    """The format error of a reply whose text cannot be encoded or whose tool arguments nest too deep,
    one line for the model to read; None when the reply can be kept as it is."""
    fields: list[tuple[str, object]] = [("the reply text", response.content), ("the reasoning", response.reasoning)]
    for call in response.tool_calls:
        fields += [("the tool name", call.name), ("the tool arguments", call.raw_arguments)]
    fields += [("the tool arguments", call.arguments) for call in response.tool_calls]
    for where, value in fields:
        problem = value_problem(value) if value is not None else None
        if problem and problem.startswith("nested"):
            return f"Format error: {where} are {problem}."
        if problem:
            return f"Format error: {where} cannot be encoded as UTF-8 (it holds a lone surrogate)."
    for call in response.tool_calls:
        if call.arguments is None and call.raw_arguments is not None and text_depth(call.raw_arguments) > MAX_DEPTH:
            return f"Format error: the tool arguments are nested deeper than {MAX_DEPTH} levels."
    return None


def repaired_response(response: AssistantResponse) -> AssistantResponse:
    """A copy of `response` every record can hold: text repaired, and arguments nested too deep kept only
    as raw text (repaired to the depth limit). The harness runs none of it: the turn is a format error."""
    calls = []
    for call in response.tool_calls:
        update: dict[str, Any] = {"name": repair_text(call.name)}
        if call.raw_arguments is not None:
            update["raw_arguments"] = repair_text(call.raw_arguments)
        if call.arguments is not None and value_depth(call.arguments) > MAX_DEPTH:
            update.update(arguments=None, raw_arguments=json.dumps(repair_value(call.arguments), ensure_ascii=False))
        elif call.arguments is not None:
            update["arguments"] = repair_value(call.arguments)
        calls.append(call.model_copy(update=update))
    return response.model_copy(update={
        "content": None if response.content is None else repair_text(response.content),
        "reasoning": None if response.reasoning is None else repair_text(response.reasoning),
        "tool_calls": calls,
        "provider_data": repair_value(response.provider_data),
    })
