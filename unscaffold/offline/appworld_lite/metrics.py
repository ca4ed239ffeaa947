"""Task and scenario goal completion, as AppWorld reports them (both in percent).

TGC is the share of tasks that succeeded; SGC the share of scenarios all of whose tasks succeeded. With
several trials per task, a task's reward is the mean over its trials, so TGC equals pass@1 and a
scenario counts for SGC only when every trial of every task in it succeeded."""

from __future__ import annotations

from collections import defaultdict

from unscaffold.benchmarks.base import Task

SUCCESS = 1.0 - 1e-9


def goal_completion(tasks: list[Task], rewards: dict[str, float]) -> dict[str, float]:
    """`tgc`, `sgc` and the counts behind them, over the tasks that have a reward."""
    scored = [t for t in tasks if t.id in rewards]
    if not scored:
        return {"tgc": 0.0, "sgc": 0.0, "n_scenarios": 0}
    by_scenario: dict[str, list[float]] = defaultdict(list)
    for t in scored:
        by_scenario[t.scenario or t.id].append(rewards[t.id])
    passed = sum(all(r >= SUCCESS for r in rs) for rs in by_scenario.values())
    return {
        "tgc": round(100.0 * sum(rewards[t.id] for t in scored) / len(scored), 4),
        "sgc": round(100.0 * passed / len(by_scenario), 4),
        "n_scenarios": len(by_scenario),
        "n_scenarios_passed": passed,
    }
