"""Reads the reward a Harbor verifier wrote to /logs/verifier, as hostile input.

Precedence as Harbor's: `reward.txt`, else `reward.json`. Both sit in a folder the task's own code
could write, so: no link followed, a size limit, a bounded parse, a finite reward in [0, 1], and only
a small summary of the JSON kept."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from unscaffold.benchmarks.base import Score
from unscaffold.outcomes import Outcome
from unscaffold.untrusted import UntrustedFileError, read_untrusted_text

MAX_REWARD_BYTES = 64 * 1024
MAX_METRICS = 32  # numeric entries of reward.json kept in details


def read_reward(verifier_dir: Path) -> Score:
    for name, parse in (("reward.txt", _from_text), ("reward.json", _from_json)):
        if not (verifier_dir / name).exists() and not (verifier_dir / name).is_symlink():
            continue
        try:
            raw = read_untrusted_text(verifier_dir, name, MAX_REWARD_BYTES)
        except UntrustedFileError as e:
            return Score(reward=0.0, reason=f"the verifier's {e}", outcome=Outcome.VERIFIER_ERROR)
        return parse(raw)
    return Score(reward=0.0, reason="the verifier wrote no reward file (reward.txt or reward.json)",
                 outcome=Outcome.VERIFIER_ERROR)


def _from_text(raw: str) -> Score:
    text = raw.strip()
    try:
        value = float(text)
    except ValueError:
        return Score(reward=0.0, reason=f"reward.txt is not a number: {text[:80]!r}", outcome=Outcome.VERIFIER_ERROR)
    return checked_reward(value, "reward.txt")


def _from_json(raw: str) -> Score:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        return Score(reward=0.0, reason=f"reward.json is not valid JSON: {e.msg}", outcome=Outcome.VERIFIER_ERROR)
    except ValueError as e:  # e.g. an integer of thousands of digits
        return Score(reward=0.0, reason=f"reward.json is not valid JSON: {str(e)[:120]}",
                     outcome=Outcome.VERIFIER_ERROR)
    except RecursionError:
        return Score(reward=0.0, reason="reward.json is nested too deeply", outcome=Outcome.VERIFIER_ERROR)
    if _is_number(data):
        return checked_reward(_as_float(data), "reward.json")
    if isinstance(data, dict):
        metrics = {str(k)[:64]: _as_float(v) for k, v in data.items() if _is_number(v)}
        summary = dict(list(metrics.items())[:MAX_METRICS])
        if "reward" in metrics:
            return checked_reward(metrics["reward"], "reward.json", summary)
        if len(metrics) == 1:
            return checked_reward(next(iter(metrics.values())), "reward.json", summary)
    return Score(reward=0.0, reason="reward.json holds no `reward` number", outcome=Outcome.VERIFIER_ERROR)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _as_float(value: int | float) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def checked_reward(value: float, source: str, metrics: dict[str, float] | None = None) -> Score:
    """A reward must be finite and in [0, 1]: anything else is the verifier's error, said as such."""
    details: dict[str, Any] = {"source": source}
    if metrics:
        details["metrics"] = {k: v if math.isfinite(v) else str(v) for k, v in metrics.items()}
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        return Score(reward=0.0, reason=f"{source} holds the reward {value!r}, outside [0, 1]", details=details,
                     outcome=Outcome.VERIFIER_ERROR)
    return Score(reward=value, details=details)
