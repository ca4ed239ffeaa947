"""The evolution budget (model calls, tokens, USD): checked before each step, so a run stops cleanly
between steps and a later run with a larger budget resumes where it stopped."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from unscaffold.errors import UnscaffoldError
from unscaffold.flags import flag
from unscaffold.run.folder import RunFolder

LLM_LOG = "llm.jsonl"


class BudgetExhausted(UnscaffoldError):
    """The budget is spent; the message says which part."""


class Budget(BaseModel):
    max_calls: int | None = Field(None, ge=1, description="Budget: model calls (analyst, editor and student).",
                                  json_schema_extra=flag("--max-calls"))
    max_tokens: int | None = Field(None, ge=1, description="Budget: input plus output tokens of every model.",
                                   json_schema_extra=flag("--max-tokens"))
    max_usd: float | None = Field(None, gt=0, description="Budget: USD, priced with --price-in/--price-out.",
                                  json_schema_extra=flag("--max-usd"))
    price_in_per_mtok: float = Field(0.0, ge=0, description="USD per million input tokens.",
                                     json_schema_extra=flag("--price-in"))
    price_out_per_mtok: float = Field(0.0, ge=0, description="USD per million output tokens.",
                                      json_schema_extra=flag("--price-out"))


class Spent(BaseModel):
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def spent(out: Path, budget: Budget) -> Spent:
    """Read from what the evolution folder records, so the count survives an interruption."""
    s = Spent()
    log = out / LLM_LOG
    if log.exists():
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                usage = json.loads(line).get("usage") or {}
            except (json.JSONDecodeError, AttributeError):
                continue
            s.calls += 1
            s.input_tokens += int(usage.get("input_tokens", 0))
            s.output_tokens += int(usage.get("output_tokens", 0))
    for run in (RunFolder(p) for p in sorted((out / "runs").glob("*"))):
        if not run.results.exists():
            continue
        try:
            data = json.loads(run.results.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        student = (data.get("tokens") or {}).get("student") or {}
        s.input_tokens += int(student.get("input", 0))
        s.output_tokens += int(student.get("output", 0))
        for trial in run.finished_trials():
            try:
                s.calls += int(json.loads(trial.result.read_text(encoding="utf-8")).get("turns", 0))
            except (OSError, json.JSONDecodeError, ValueError):
                continue
    s.usd = (s.input_tokens * budget.price_in_per_mtok + s.output_tokens * budget.price_out_per_mtok) / 1e6
    return s


def check_budget(out: Path, budget: Budget) -> Spent:
    s = spent(out, budget)
    if budget.max_calls is not None and s.calls >= budget.max_calls:
        raise BudgetExhausted(f"budget spent: {s.calls} model calls of {budget.max_calls}")
    if budget.max_tokens is not None and s.tokens >= budget.max_tokens:
        raise BudgetExhausted(f"budget spent: {s.tokens} tokens of {budget.max_tokens}")
    if budget.max_usd is not None and s.usd >= budget.max_usd:
        raise BudgetExhausted(f"budget spent: ${s.usd:.4f} of ${budget.max_usd:.4f}")
    return s
