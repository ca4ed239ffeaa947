"""Cluster-wide caps on model calls in flight: one Ray actor hands out slots to every node.

`--reviewer-concurrency` must hold for the whole cluster, not per node, or 200 trials on 10 nodes would
send ten times the calls a provider allows. Slots are held by a Ray task id, so the driver frees what an
attempt held when that attempt ends, also when its node died holding them."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any


class SlotsActor:
    """Named pools of slots (`reviewer`, ...); `acquire` waits, `release` gives one back."""

    def __init__(self, limits: dict[str, int]) -> None:
        self.limits = dict(limits)
        self.used: Counter[str] = Counter()
        self.held: dict[str, Counter[str]] = {}
        self.peak: Counter[str] = Counter()
        self.changed: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self.changed is None:  # made on the actor's event loop
            self.changed = asyncio.Condition()
        return self.changed

    async def acquire(self, pool: str, holder: str) -> None:
        changed = self._condition()
        async with changed:
            await changed.wait_for(lambda: self.used[pool] < self.limits[pool])
            self.used[pool] += 1
            self.peak[pool] = max(self.peak[pool], self.used[pool])
            self.held.setdefault(holder, Counter())[pool] += 1

    async def release(self, pool: str, holder: str) -> None:
        changed = self._condition()
        async with changed:
            if self.held.get(holder, Counter())[pool] > 0:
                self.held[holder][pool] -= 1
                self.used[pool] -= 1
                changed.notify_all()

    async def release_holder(self, holder: str) -> int:
        """Free every slot `holder` still has (its attempt ended, perhaps with its node); returns how many."""
        changed = self._condition()
        async with changed:
            slots = self.held.pop(holder, Counter())
            for pool, n in slots.items():
                self.used[pool] -= n
            if slots:
                changed.notify_all()
            return sum(slots.values())

    async def stats(self) -> dict[str, Any]:
        return {"used": dict(self.used), "peak": dict(self.peak), "limits": self.limits}


class RaySlot:
    """A context manager taking one slot of `pool` for the Ray task that runs it (a `ThrottledReviewers` gate)."""

    def __init__(self, actor: Any, pool: str) -> None:
        self.actor, self.pool = actor, pool

    def _holder(self) -> str:
        import ray

        return ray.get_runtime_context().get_task_id() or "driver"

    def __enter__(self) -> RaySlot:
        import ray

        ray.get(self.actor.acquire.remote(self.pool, self._holder()))
        return self

    def __exit__(self, *exc: object) -> None:
        self.actor.release.remote(self.pool, self._holder())
