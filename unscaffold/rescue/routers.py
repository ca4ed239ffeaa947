"""Routers: for a task whose base group all failed, the siblings to re-sample under, best first.

`random` draws uniformly; `rule` ranks siblings by their success rate on the most similar validation
tasks (word-set Jaccard of the instructions, ties by task id); `adaptive` lets one or more LLMs vote
with per-sibling behaviour profiles (profiles.py). A router ranks the base harness too where its
validation data has it, so "prefers the base" can be measured; `pick` returns siblings only, cycling
through the ranking when more picks are asked for than the pool holds."""

from __future__ import annotations

import hashlib
import random
from typing import Protocol

from pydantic import BaseModel

from unscaffold.rescue.pool import BASE
from unscaffold.rescue.validation import ValidationTable, similarity

ROUTERS = ("random", "rule", "adaptive")
NEIGHBOURS = 5


class TaskView(BaseModel):
    """What a router may see of a task: its id and instruction (never its answer)."""

    task_id: str
    text: str


class Router(Protocol):
    name: str

    def rank(self, task: TaskView) -> list[str]:
        """Every candidate (siblings, and `base` where known), best first."""
        ...


def default_top_k(k: int) -> int:
    """Siblings per rescue group when none is named: the published ablation's 4 harnesses x 2 samples at K = 8;
    for another K, the largest divisor of K up to 4, so every sibling samples K / top-k rollouts."""
    return max(d for d in range(1, min(TOP_K, k) + 1) if k % d == 0)


TOP_K = 4


def pick(router: Router, task: TaskView, k: int, top_k: int | None = None) -> list[str]:
    """The k harnesses of a rescue group: the router's `top_k` best siblings (cycling through the ranking when
    the pool holds fewer), each sampled k / top_k times, the remainder going to the best ranked."""
    ranked = [h for h in router.rank(task) if h != BASE]
    if not ranked:
        raise ValueError(f"router {router.name} ranked no sibling for {task.task_id}")
    top = top_k or k
    chosen = [ranked[i % len(ranked)] for i in range(top)]
    return [chosen[i % top] for i in range(k)]


def prefers_base(router: Router, task: TaskView) -> bool | None:
    """Whether the router prefers the base harness for the task: True only when base scores strictly above
    every sibling, False when a sibling does, None (undecided) on a tie or for a router without scores (a
    random or control router says nothing of the base harness)."""
    scores_of = getattr(router, "scores", None)
    if scores_of is None:
        return None
    scores = scores_of(task)
    if not scores:
        return None
    if BASE not in scores:
        return False
    others = [v for h, v in scores.items() if h != BASE]
    best = max(others, default=float("-inf"))
    if scores[BASE] == best:
        return None
    return scores[BASE] > best


class RandomRouter:
    name = "random"

    def __init__(self, siblings: list[str], seed: int = 0) -> None:
        self.siblings, self.seed = list(siblings), seed

    def rank(self, task: TaskView) -> list[str]:
        """A shuffle seeded by (seed, task id): reproducible, and different per task."""
        digest = hashlib.sha256(f"{self.seed}:{task.task_id}".encode()).digest()
        order = list(self.siblings)
        random.Random(digest).shuffle(order)
        return order


class RuleRouter:
    """Success rate of each sibling on the `neighbours` validation tasks most similar to the task."""

    name = "rule"

    def __init__(self, siblings: list[str], table: ValidationTable, neighbours: int = NEIGHBOURS) -> None:
        self.siblings, self.table, self.neighbours = list(siblings), table, neighbours
        self.anchors = 1

    def reanchor(self, table: ValidationTable) -> None:
        """Learn from the current policy's validation runs instead of the earlier ones."""
        self.table = table
        self.anchors += 1

    def nearest(self, task: TaskView) -> list[str]:
        scored = sorted((-similarity(task.text, t.text), t.task_id) for t in self.table.tasks
                         if t.task_id != task.task_id)
        return [tid for _, tid in scored[: self.neighbours]]

    def scores(self, task: TaskView) -> dict[str, float]:
        by_id = {t.task_id: t for t in self.table.tasks}
        near = [by_id[tid] for tid in self.nearest(task)]
        out = {}
        for harness in [BASE, *self.siblings]:
            rates = [r for t in near if (r := t.success_rate(harness)) is not None]
            if rates:
                out[harness] = sum(rates) / len(rates)
            elif harness != BASE:
                out[harness] = 0.0
        return out

    def rank(self, task: TaskView) -> list[str]:
        scores = self.scores(task)
        order = {h: i for i, h in enumerate([BASE, *self.siblings])}
        return sorted(scores, key=lambda h: (-scores[h], order[h]))


class ControlRouter:
    """The published controls, as routers the trainer and metrics treat like any other: `none` ranks
    nothing (plain GRPO, never rescues), `same` ranks only the base harness (a failed group is
    re-sampled K more times under it), `fixed` ranks the pool in its own order whatever the task
    (every rescue group is the same fixed mixture of siblings)."""

    def __init__(self, name: str, order: list[str]) -> None:
        self.name, self.order = name, list(order)

    def rank(self, task: TaskView) -> list[str]:
        return list(self.order)
