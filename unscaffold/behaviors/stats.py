"""Bootstrap intervals over tasks and paired differences: seeded, so the same runs give the same figures."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

SAMPLES = 2000
LEVEL = 0.95


class Interval(BaseModel):
    value: float
    low: float
    high: float

    def text(self, signed: bool = False) -> str:
        f = "{:+.1f}" if signed else "{:.1f}"
        return f"{f.format(self.value)} [{f.format(self.low)}, {f.format(self.high)}]"


def bootstrap(values: list[float], *, seed: int = 0, samples: int = SAMPLES, level: float = LEVEL) -> Interval:
    """Percent mean of `values` with a percentile bootstrap interval (resampling the units with replacement)."""
    data = np.asarray(values, dtype=float) * 100.0
    if data.size == 0:
        return Interval(value=0.0, low=0.0, high=0.0)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(samples, data.size))].mean(axis=1)
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return Interval(value=round(float(data.mean()), 4), low=round(float(low), 4), high=round(float(high), 4))


class Paired(BaseModel):
    """Per-task difference of a run against the baseline, in percentage points."""

    diff: Interval
    better: int
    worse: int
    same: int


def paired(run: dict[str, float], baseline: dict[str, float], *, seed: int = 0) -> Paired:
    tasks = sorted(baseline)
    diffs = [run[t] - baseline[t] for t in tasks]
    return Paired(diff=bootstrap(diffs, seed=seed), better=sum(d > 0 for d in diffs),
                  worse=sum(d < 0 for d in diffs), same=sum(d == 0 for d in diffs))
