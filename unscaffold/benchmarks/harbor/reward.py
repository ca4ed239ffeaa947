"""Reads the reward a Harbor verifier wrote to /logs/verifier."""

from __future__ import annotations

import json
import math
from pathlib import Path

from unscaffold.benchmarks.base import Score


def read_reward(verifier_dir: Path) -> Score:
    txt, js = verifier_dir / "reward.txt", verifier_dir / "reward.json"
    if txt.is_file():
        raw = txt.read_text(encoding="utf-8", errors="replace").strip()
        try:
            value = float(raw)
        except ValueError:
            return Score(reward=0.0, reason=f"reward.txt is not a number: {raw[:80]!r}")
        return _bounded(value, "reward.txt")
    if js.is_file():
        try:
            data = json.loads(js.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            return Score(reward=0.0, reason=f"reward.json is not valid JSON: {e.msg}")
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return _bounded(float(data), "reward.json")
        if isinstance(data, dict):
            if isinstance(data.get("reward"), (int, float)):
                return _bounded(float(data["reward"]), "reward.json", details=data)
            numbers = [v for v in data.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if len(numbers) == 1:
                return _bounded(float(numbers[0]), "reward.json", details=data)
        return Score(reward=0.0, reason="reward.json holds no `reward` number")
    return Score(reward=0.0, reason="the verifier wrote no reward file (reward.txt or reward.json)")


def _bounded(value: float, source: str, details: dict | None = None) -> Score:
    if math.isnan(value):
        return Score(reward=0.0, reason=f"{source} is NaN")
    return Score(reward=value, details={"source": source, **({"metrics": details} if details else {})})
