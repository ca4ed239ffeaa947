"""The rescue decision and the advantage arithmetic, on plain numbers.

One module for every training path (TRL on one node, verl beyond): what the tests prove about the
all-fail test, the group replacement and the advantages holds wherever the trainer runs."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, Field

STD_EPS = 1e-6  # floor of the group std in (R - mean) / max(std, eps)
SUCCESS = 1.0  # a rollout succeeds when its reward reaches this


def succeeded(reward: float, success: float = SUCCESS) -> bool:
    return reward >= success


def all_fail(rewards: Sequence[float], success: float = SUCCESS) -> bool:
    """No rollout of the group succeeded: with binary rewards every advantage is zero, so no gradient."""
    if not rewards:
        raise ValueError("a group needs at least one reward")
    return not any(succeeded(r, success) for r in rewards)


def effective(rewards: Sequence[float], success: float = SUCCESS) -> bool:
    """A group that teaches something: it holds both a success and a failure."""
    wins = sum(succeeded(r, success) for r in rewards)
    return 0 < wins < len(rewards)


def group_advantages(rewards: Sequence[float], eps: float = STD_EPS) -> list[float]:
    """(R - mean) / max(std, eps), std over the group itself (population std: the group is all there is)."""
    n = len(rewards)
    if n == 0:
        raise ValueError("a group needs at least one reward")
    mean = sum(rewards) / n
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / n)
    scale = max(std, eps)
    return [(r - mean) / scale for r in rewards]


class GroupOutcome(BaseModel):
    """One task's group after the rescue decision: the rewards that train and where they came from."""

    task_id: str
    base_rewards: list[float]
    rescued: bool = False
    harnesses: list[str] = Field(default_factory=list, description="the sibling of each rescue rollout")
    rewards: list[float] = Field(description="the group that trains: the base group, or the rescue group")
    advantages: list[float]

    @property
    def rollouts(self) -> int:
        return len(self.base_rewards) + (len(self.rewards) if self.rescued else 0)


def settle_group(task_id: str, base_rewards: Sequence[float], rescue_rewards: Sequence[float] | None = None,
                 harnesses: Sequence[str] = (), success: float = SUCCESS, eps: float = STD_EPS) -> GroupOutcome:
    """Replace an all-fail group with its rescue group; a group with any success keeps its own rollouts.

    `rescue_rewards` is read only when the base group all failed; None there keeps the failed group."""
    base = list(base_rewards)
    if not all_fail(base, success) or rescue_rewards is None:
        return GroupOutcome(task_id=task_id, base_rewards=base, rewards=base, advantages=group_advantages(base, eps))
    rescue = list(rescue_rewards)
    if harnesses and len(harnesses) != len(rescue):
        raise ValueError(f"{task_id}: {len(rescue)} rescue rewards for {len(harnesses)} harnesses")
    return GroupOutcome(task_id=task_id, base_rewards=base, rescued=True, harnesses=list(harnesses), rewards=rescue,
                        advantages=group_advantages(rescue, eps))


class StepStats(BaseModel):
    """Per-step figures of rescue GRPO (one line of metrics.jsonl, with `step` added by the caller)."""

    groups: int
    effective_group_rate: float = Field(description="share of groups (after rescue) with a success and a failure")
    base_effective_group_rate: float = Field(description="the same before rescue: what plain GRPO would train on")
    rescued_groups: int
    rescue_success_rate: float = Field(description="share of rescue groups with at least one success")
    rollouts: int
    grpo_rollouts: int = Field(description="rollouts plain GRPO would have used (the base groups only)")
    extra_rollout_pct: float = Field(description="rollouts beyond plain GRPO, in percent of it")


def step_stats(outcomes: Sequence[GroupOutcome], success: float = SUCCESS) -> StepStats:
    n = len(outcomes)
    rescued = [o for o in outcomes if o.rescued]
    rollouts = sum(o.rollouts for o in outcomes)
    grpo = sum(len(o.base_rewards) for o in outcomes)
    return StepStats(
        groups=n,
        effective_group_rate=sum(effective(o.rewards, success) for o in outcomes) / n if n else 0.0,
        base_effective_group_rate=sum(effective(o.base_rewards, success) for o in outcomes) / n if n else 0.0,
        rescued_groups=len(rescued),
        rescue_success_rate=(sum(not all_fail(o.rewards, success) for o in rescued) / len(rescued)) if rescued else 0.0,
        rollouts=rollouts,
        grpo_rollouts=grpo,
        extra_rollout_pct=100.0 * (rollouts - grpo) / grpo if grpo else 0.0,
    )
