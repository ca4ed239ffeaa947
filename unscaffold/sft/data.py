"""Reading chat rows (`build-sft`'s, or any in TRL's conversational format) and turning them into training
samples, every dropped one counted by reason."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unscaffold.errors import InputError
from unscaffold.iojson import validation_error
from unscaffold.llm.types import Message
from unscaffold.sft.render import RenderError, Sample, render_row, trained_turns


class SFTRow(BaseModel):
    """One row as `build-sft` writes it; other keys (task ids, counts) are carried but not read."""

    model_config = ConfigDict(extra="allow")

    messages: list[Message] = Field(min_length=1)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    masked_reasoning_turns: list[int] = Field(default_factory=list)
    context_turns: list[int] = Field(default_factory=list, description="assistant turns that are context only "
                                     "(a suite's worked example before the task): rendered, never trained")


class Dropped(BaseModel):
    """A row (or, with split turns, one turn of it) left out of training, and why."""

    row: int
    turn: int | None = None
    reason: str
    detail: str


@dataclass
class Prepared:
    """Samples ready for the trainer and an account of what did not make it."""

    rows: int
    samples: list[Sample] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    rows_used: int = 0
    rows_split: list[int] = field(default_factory=list)  # rows trained turn by turn without --split-turns
    sources: dict[str, int] = field(default_factory=dict)  # rows per `source` label (build-sft's), when rows have one

    def dropped_by_reason(self) -> dict[str, int]:
        return dict(sorted(Counter(d.reason for d in self.dropped).items()))


def read_rows(path: Path) -> list[SFTRow]:
    """Every row of DATA.jsonl, validated; a bad row is an InputError naming the line and field."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(str(path), None, "file not found") from None
    except OSError as e:
        raise InputError(str(path), None, f"cannot read: {e.strerror}") from None
    rows = []
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise InputError(str(path), f"line {n}", f"invalid JSON: {e}") from None
        rows.append(parse_row(data, f"{path}", f"line {n}"))
    if not rows:
        raise InputError(str(path), None, "no rows")
    return rows


REASONING_ALIASES = ("reasoning", "thinking")  # other templates' names for `reasoning_content`


def conversational(data: dict[str, Any]) -> dict[str, Any]:
    """A row in TRL's conversational format, in the shape `build-sft` writes: tool calls get an `id`
    (`call_<message>_<n>`) and `type` where missing (a bare `{"name", "arguments"}` is wrapped in
    `function`), a tool result without `tool_call_id` answers the next
    unanswered call before it, `reasoning` or `thinking` becomes `reasoning_content`, a `null` content is
    empty and text parts are joined. Arguments stay as given (an object or a JSON string); rendering
    decodes a JSON string. Anything else is left for validation to name."""
    messages = data.get("messages")
    if not isinstance(messages, list):
        return data
    out, pending = [], []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            out.append(message)
            continue
        m = dict(message)
        if m.get("content") is None and "content" in m:
            m["content"] = ""
        elif isinstance(m.get("content"), list) and all(isinstance(p, dict) and p.get("type") == "text"
                                                        for p in m["content"]):
            m["content"] = "".join(str(p.get("text", "")) for p in m["content"])
        for alias in REASONING_ALIASES:
            if m.get("reasoning_content") is None and isinstance(m.get(alias), str):
                m["reasoning_content"] = m.pop(alias)
        if m.get("role") == "assistant" and isinstance(m.get("tool_calls"), list):
            calls = []
            for n, call in enumerate(m["tool_calls"]):
                if isinstance(call, dict):
                    if "function" not in call and "name" in call:  # a bare {"name", "arguments"} call
                        call = {"function": {k: call[k] for k in ("name", "arguments") if k in call},
                                **{k: v for k, v in call.items() if k in ("id", "type")}}
                    call = {"type": "function", **call}
                    if not call.get("id"):
                        call["id"] = f"call_{i}_{n}"
                calls.append(call)
            m["tool_calls"] = calls
            pending = [c["id"] for c in calls if isinstance(c, dict)]
        elif m.get("role") == "tool":
            if not m.get("tool_call_id") and pending:
                m["tool_call_id"] = pending[0]
            if m.get("tool_call_id") in pending:
                pending.remove(m["tool_call_id"])
        out.append(m)
    return {**data, "messages": out}


def prompt_completion(data: dict[str, Any], source: str, where: str) -> dict[str, Any]:
    """TRL's prompt/completion conversational row as a `messages` row: the prompt's messages then the
    completion's; an assistant turn of the prompt is context only (`context_turns`), as TRL trains the
    completion alone. `tools` given as JSON text (as Arrow-backed datasets store them) is decoded."""
    if "messages" not in data and "prompt" in data and "completion" in data:
        prompt, completion = data["prompt"], data["completion"]
        for key, value in (("prompt", prompt), ("completion", completion)):
            if not isinstance(value, list):
                raise InputError(source, f"{where}: {key}", "expected a list of messages (TRL's conversational "
                                 "prompt/completion format)")
        rest = {k: v for k, v in data.items() if k not in ("prompt", "completion")}
        context = [i for i, m in enumerate(prompt) if isinstance(m, dict) and m.get("role") == "assistant"]
        data = {**rest, "messages": [*prompt, *completion],
                "context_turns": sorted({*context, *rest.get("context_turns", ())})}
    tools = data.get("tools")
    if tools is None:  # a dataset column without a value for this row
        tools = []
    elif isinstance(tools, str):
        tools = _json_text(tools, source, f"{where}: tools")
    if isinstance(tools, list):
        tools = [_json_text(t, source, f"{where}: tools.{n}") if isinstance(t, str) else t
                 for n, t in enumerate(tools)]
    return {**data, "tools": tools} if "tools" in data else data


def _json_text(text: str, source: str, where: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise InputError(source, where, f"a JSON string that is not valid JSON: {e}") from None


def parse_row(data: Any, source: str, where: str) -> SFTRow:
    if not isinstance(data, dict):
        raise InputError(source, where, "a row must be a JSON object")
    data = prompt_completion(data, source, where)
    if "messages" not in data:
        raise InputError(source, f"{where}: messages", "missing (a build-sft row has messages and tools; a TRL "
                         "row has messages, or prompt and completion)")
    try:
        row = SFTRow.model_validate(conversational(data))
    except ValidationError as e:
        err = validation_error(source, e)
        raise InputError(source, f"{where}: {err.field}", err.problem) from None
    for key in ("masked_reasoning_turns", "context_turns"):
        for turn in getattr(row, key):
            if not 0 <= turn < len(row.messages) or row.messages[turn].role != "assistant":
                raise InputError(source, f"{where}: {key}", f"{turn} is not the index of an assistant message")
    return row


def prepare(rows: list[SFTRow], tokenizer: Any, *, max_length: int, split_turns: bool,
            progress: Callable[[], None] | None = None) -> Prepared:
    """Render every row (or every turn with `split_turns`, or of a row a tokenizer merge breaks); too long,
    unrenderable or prefix-breaking rows are dropped and recorded with their row index and turn, never cut."""
    out = Prepared(rows=len(rows))
    labels = Counter(str((row.model_extra or {}).get("source")) for row in rows
                     if (row.model_extra or {}).get("source"))
    out.sources = dict(sorted(labels.items()))
    for i, row in enumerate(rows):
        if progress is not None:
            progress()
        try:
            samples, split = render_row(row.messages, row.tools, tokenizer, row.masked_reasoning_turns,
                                        split_turns=split_turns, context_turns=row.context_turns)
        except RenderError as e:
            out.dropped.append(Dropped(row=i, turn=e.turn, reason=e.reason, detail=str(e)))
            continue
        if split and not split_turns:
            out.rows_split.append(i)
        turns = trained_turns(row.messages, row.context_turns)
        kept = len(out.samples)
        for j, sample in enumerate(samples):
            if len(sample.input_ids) > max_length:
                out.dropped.append(Dropped(
                    row=i, turn=turns[j] if split else None, reason="too_long",
                    detail=f"{len(sample.input_ids)} tokens > max_length {max_length}"))
            elif sample.trained_tokens == 0:
                out.dropped.append(Dropped(row=i, turn=turns[j] if split else None, reason="nothing_trained",
                                           detail="no assistant token to train"))
            else:
                out.samples.append(sample)
        out.rows_used += len(out.samples) > kept
    return out
