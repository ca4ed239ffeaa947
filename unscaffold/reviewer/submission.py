"""The review submission (PASS or REPLACE) and its format check.

The check is hand-written rather than left to pydantic so that every rejection is one fixed line:
the line goes back to the reviewer LLM to fix its answer, into `reviews.jsonl`, and into tests."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from unscaffold.errors import UnscaffoldError
from unscaffold.llm.json_bounds import TooDeep, loads_bounded, value_problem
from unscaffold.llm.types import AssistantResponse, ToolCall
from unscaffold.minimal_harness.tool import TOOL_NAME

REASON_MAX = 500
FIELDS = ("decision", "replacement", "components_used", "reason")
REPLACEMENT_FIELDS = ("reasoning", "content", "tool_call")
TOOL_CALL_FIELDS = ("name", "arguments")
COMMAND_PROBLEM = f"the replacement's `{TOOL_NAME}` call needs one non-empty string `command`"
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.S)


class InvalidSubmission(UnscaffoldError):
    """A submission that breaks the protocol; the message is one line meant for the reviewer to fix."""


class ReplacementCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Literal["execute"] = TOOL_NAME
    arguments: dict[str, Any]


class Replacement(BaseModel):
    """A complete student response written by the reviewer: visible text and/or one `execute` call."""

    model_config = ConfigDict(extra="forbid")
    reasoning: str | None = None
    content: str | None = None
    tool_call: ReplacementCall | None = None

    def to_response(self, call_id: str) -> AssistantResponse:
        """The response the student keeps in its transcript, shaped exactly like one it produced itself."""
        calls = []
        if self.tool_call is not None:
            command = self.tool_call.arguments["command"]
            calls.append(ToolCall(id=call_id, name=TOOL_NAME, arguments={"command": command}))
        return AssistantResponse(reasoning=self.reasoning or None, content=self.content or None, tool_calls=calls)


class ReviewSubmission(BaseModel):
    model_config = ConfigDict(extra="forbid")
    decision: Literal["PASS", "REPLACE"]
    replacement: Replacement | None = None
    components_used: list[str] = Field(default_factory=list)
    reason: str


def _parse(raw: str | dict[str, Any]) -> Any:
    """The submission as JSON values, refused when it could not be kept in a record: nested too deep, or
    holding text that cannot be encoded (a lone surrogate)."""
    data: Any = raw
    if isinstance(raw, str):
        fenced = _FENCE.match(raw)  # a plain-text reply often wraps the JSON in a code fence
        try:
            data = loads_bounded(fenced.group(1) if fenced else raw)
        except TooDeep as e:
            raise InvalidSubmission(f"submission is {e}") from None
        except json.JSONDecodeError as e:
            raise InvalidSubmission(f"submission is not valid JSON: {e.msg}") from None
    problem = value_problem(data)
    if problem:
        raise InvalidSubmission(f"submission is {problem}" if problem.startswith("nested") else
                                f"submission holds {problem}")
    return data


def _unknown(data: dict[str, Any], allowed: tuple[str, ...], prefix: str = "") -> None:
    for key in data:
        if key not in allowed:
            raise InvalidSubmission(f"unknown field `{prefix}{key}`")


def _check_call(call: Any) -> ReplacementCall:
    if not isinstance(call, dict):
        raise InvalidSubmission("the replacement's `tool_call` must be an object with `name` and `arguments`")
    _unknown(call, TOOL_CALL_FIELDS, "replacement.tool_call.")
    name = call.get("name")
    if name != TOOL_NAME:
        raise InvalidSubmission(f"the replacement may only call `{TOOL_NAME}` (got `{name}`)")
    arguments = call.get("arguments")
    if isinstance(arguments, str):  # some models send the arguments as JSON text
        try:
            arguments = loads_bounded(arguments)
        except ValueError:
            raise InvalidSubmission(COMMAND_PROBLEM) from None
        if value_problem(arguments):  # the text's own escapes may decode to a lone surrogate
            raise InvalidSubmission(f"submission holds {value_problem(arguments)}")
    if not isinstance(arguments, dict) or set(arguments) != {"command"}:
        raise InvalidSubmission(COMMAND_PROBLEM)
    command = arguments["command"]
    if not isinstance(command, str) or not command.strip():
        raise InvalidSubmission(COMMAND_PROBLEM)
    return ReplacementCall(arguments={"command": command})


def _check_replacement(value: Any) -> Replacement:
    if not isinstance(value, dict):
        raise InvalidSubmission("the replacement must be a JSON object")
    _unknown(value, REPLACEMENT_FIELDS, "replacement.")
    for key in ("reasoning", "content"):
        if value.get(key) is not None and not isinstance(value[key], str):
            raise InvalidSubmission(f"replacement.{key} must be a string")
    content, call = value.get("content"), value.get("tool_call")
    if call is None and not (content and content.strip()):
        raise InvalidSubmission(f"the replacement needs visible content or an `{TOOL_NAME}` call")
    return Replacement(
        reasoning=value.get("reasoning"),
        content=content,
        tool_call=_check_call(call) if call is not None else None,
    )


def check_submission(raw: str | dict[str, Any], known_components: set[str] | None = None) -> ReviewSubmission:
    """Validate what a reviewer submitted; raises InvalidSubmission naming the first problem.

    `known_components` (K's component ids) enables the check of `components_used`; None skips it."""
    data = _parse(raw)
    if not isinstance(data, dict):
        raise InvalidSubmission("submission must be a JSON object")
    _unknown(data, FIELDS)
    decision = data.get("decision")
    if decision not in ("PASS", "REPLACE"):
        raise InvalidSubmission("decision must be PASS or REPLACE")
    replacement = data.get("replacement")
    checked: Replacement | None = None
    if decision == "PASS" and replacement is not None:
        raise InvalidSubmission("PASS carries no replacement")
    if decision == "REPLACE":
        if replacement is None:
            raise InvalidSubmission("REPLACE needs a replacement")
        checked = _check_replacement(replacement)
    reason = data.get("reason")
    length = len(reason) if isinstance(reason, str) and reason.strip() else 0
    if not 1 <= length <= REASON_MAX:
        raise InvalidSubmission(f"reason must be 1-{REASON_MAX} characters (got {length})")
    components = data.get("components_used")
    if components is None:
        components = []
    if not isinstance(components, list) or not all(isinstance(c, str) for c in components):
        raise InvalidSubmission("components_used must be a list of component ids (strings)")
    if known_components is not None:
        unknown = list(dict.fromkeys(c for c in components if c not in known_components))
        if unknown:
            raise InvalidSubmission(f"unknown components_used: {', '.join(unknown)}")
    return ReviewSubmission(decision=decision, replacement=checked, components_used=components, reason=reason)
