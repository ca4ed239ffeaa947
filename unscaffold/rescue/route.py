"""Rank-1 routing at inference: each task runs under the harness its router ranks first.

The tasks are grouped by their chosen harness and each group is an ordinary run (`OUT/by-harness/NAME`,
resumable like any run); `OUT/results.json` joins them, with `harness_per_task` saying which sibling
(or `base`) ran each task and `routing.json` the full rankings."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from unscaffold.rescue.pool import BASE, Pool
from unscaffold.rescue.routers import Router, TaskView
from unscaffold.rescue.settings import default_router
from unscaffold.specs.harness import SHIPPED, HarnessSpec


def route_tasks(router: Router, tasks: list[TaskView]) -> dict[str, list[str]]:
    """Task id -> the router's full ranking (first = where it runs)."""
    return {t.task_id: router.rank(t) for t in tasks}


def run_routed(config: Any, pool: Pool, router: Router, progress: Any = None) -> dict[str, Any]:
    """`config` is the RunConfig of the whole run; its `harness` is ignored (each group gets its own)."""
    from unscaffold.benchmarks import load_suite
    from unscaffold.run.aggregate import aggregate
    from unscaffold.run.folder import RunFolder
    from unscaffold.run.models import TrialResult
    from unscaffold.run.runner import run as run_suite
    from unscaffold.run.setup import select_tasks

    with load_suite(config.suite, config.data, config.split_file) as suite:
        tasks = select_tasks(suite, config)
        rankings = route_tasks(router, [TaskView(task_id=t.id, text=t.instruction) for t in tasks])
        chosen = {tid: ranking[0] for tid, ranking in rankings.items()}
        groups: dict[str, list[str]] = defaultdict(list)
        for tid, harness in chosen.items():
            groups[harness].append(tid)
        t0 = time.monotonic()
        results: list[TrialResult] = []
        folder = RunFolder(config.out)
        for harness, ids in sorted(groups.items()):
            part = folder.part(harness)
            sub = config.model_copy(update={
                "out": part.root, "task_ids": ids,
                "harness": HarnessSpec.parse(pool.spec.base if harness == BASE else str(pool.banks[harness]),
                                             flag=f"{pool.path}: base")})
            run_suite(sub, progress=progress)
            results += part.read_trial_results()
        routed = config.model_copy(update={"harness": HarnessSpec(kind="route", path=str(pool.path))})
        summary = aggregate(suite, routed, tasks, results, wall_time_s=time.monotonic() - t0).model_dump(mode="json")
        summary.update(router=router.name, harness_per_task=chosen)
        folder.write_routing(router.name, rankings)
        folder.write_results(summary)
        return summary



def run_route_spec(config: Any) -> dict[str, Any]:
    """`unscaffold run ... --harness route:POOL --router R`: the pool (a pool.toml, or `shipped` for the
    suite's own) materialised under the run folder, the router built, then `run_routed`."""
    from unscaffold.rescue.pool import load_pool, materialise, shipped_pool
    from unscaffold.rescue.router_loader import load_router
    from unscaffold.rescue.validation import load_table
    from unscaffold.run.folder import RunFolder

    spec = config.harness.path
    pool_path = shipped_pool(config.suite) if spec == SHIPPED else Path(spec)
    loaded = materialise(load_pool(pool_path), RunFolder(config.out).pool_dir)
    table = load_table(config.router_validation) if config.router_validation else None
    router = load_router(default_router(config.router, config.router_validation), loaded.names, table)
    return run_routed(config, loaded, router)
