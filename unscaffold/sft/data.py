"""Reading `build-sft` rows and turning them into training samples, every dropped one counted by reason."""

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
from unscaffold.sft.render import RenderError, Sample, render_sample, render_turns


class SFTRow(BaseModel):
    """One row as `build-sft` writes it; other keys (task ids, counts) are carried but not read."""

    model_config = ConfigDict(extra="allow")

    messages: list[Message] = Field(min_length=1)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    masked_reasoning_turns: list[int] = Field(default_factory=list)


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


def parse_row(data: Any, source: str, where: str) -> SFTRow:
    if not isinstance(data, dict):
        raise InputError(source, where, "a row must be a JSON object")
    if "messages" not in data:
        raise InputError(source, f"{where}: messages", "missing (a build-sft row has messages and tools)")
    try:
        row = SFTRow.model_validate(data)
    except ValidationError as e:
        err = validation_error(source, e)
        raise InputError(source, f"{where}: {err.field}", err.problem) from None
    for turn in row.masked_reasoning_turns:
        if not 0 <= turn < len(row.messages) or row.messages[turn].role != "assistant":
            raise InputError(source, f"{where}: masked_reasoning_turns",
                             f"{turn} is not the index of an assistant message")
    return row


def prepare(rows: list[SFTRow], tokenizer: Any, *, max_length: int, split_turns: bool,
            progress: Callable[[], None] | None = None) -> Prepared:
    """Render every row (or every turn with `split_turns`); too long, unrenderable or prefix-breaking rows are
    dropped and recorded with their row index and turn, never cut."""
    out = Prepared(rows=len(rows))
    for i, row in enumerate(rows):
        if progress is not None:
            progress()
        try:
            if split_turns:
                samples = render_turns(row.messages, row.tools, tokenizer, row.masked_reasoning_turns)
            else:
                samples = [render_sample(row.messages, row.tools, tokenizer, row.masked_reasoning_turns)]
        except RenderError as e:
            out.dropped.append(Dropped(row=i, turn=e.turn, reason=e.reason, detail=str(e)))
            continue
        turns = [k for k, m in enumerate(row.messages) if m.role == "assistant"]
        kept = len(out.samples)
        for j, sample in enumerate(samples):
            if len(sample.input_ids) > max_length:
                out.dropped.append(Dropped(
                    row=i, turn=turns[j] if split_turns else None, reason="too_long",
                    detail=f"{len(sample.input_ids)} tokens > max_length {max_length}"))
            elif sample.trained_tokens == 0:
                out.dropped.append(Dropped(row=i, turn=turns[j] if split_turns else None, reason="nothing_trained",
                                           detail="no assistant token to train"))
            else:
                out.samples.append(sample)
        out.rows_used += len(out.samples) > kept
    return out
