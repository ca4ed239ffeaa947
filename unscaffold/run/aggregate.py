"""From trial results to `results.json`: pass@1, per-task rewards, suite metrics, counts and costs."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from unscaffold import __version__
from unscaffold.benchmarks import Suite, Task
from unscaffold.llm.types import Usage
from unscaffold.outcomes import Outcome
from unscaffold.run.models import RunConfig, RunResults, TrialResult

SUCCESS = 1.0 - 1e-9


def isolation_kind(isolation: str) -> str:
    """A trial's isolation without what differs between trials of one kind (the uid each sandbox ran as)."""
    return re.sub(r"\buid \d+", "a uid of its own", isolation)


def _one_or_mixed(values: set[str]) -> str:
    return next(iter(values)) if len(values) == 1 else ("mixed: see isolations" if values else "")


def aggregate(
    suite: Suite, config: RunConfig, tasks: list[Task], results: list[TrialResult], wall_time_s: float
) -> RunResults:
    rewards: dict[str, list[float]] = defaultdict(list)
    for r in results:
        rewards[r.task_id].append(r.reward)
    per_task = {t.id: sum(rewards[t.id]) / len(rewards[t.id]) for t in tasks if rewards[t.id]}
    success = {t.id: sum(x >= SUCCESS for x in rewards[t.id]) / len(rewards[t.id]) for t in tasks if rewards[t.id]}
    n = len(per_task)
    student, reviewer = Usage(), Usage()
    for r in results:
        student, reviewer = student + r.student_usage, reviewer + r.review.usage
    summary = RunResults(
        suite=suite.name,
        student=str(config.student),
        harness=str(config.harness),
        split=config.split,
        n_tasks=n,
        n_trials=len(results),
        pass_at_1=round(100.0 * sum(success.values()) / n, 4) if n else 0.0,
        mean_reward=round(sum(per_task.values()) / n, 6) if n else 0.0,
        per_task=per_task,
        reviewer=str(config.reviewer) if config.reviewer else None,
        knowledge=str(config.knowledge) if config.knowledge else None,
        budget=config.budget if config.reviewer else None,
        reviewer_calls=sum(r.review.calls for r in results),
        reviewer_calls_saved=sum(r.review.saved_calls for r in results),
        invalid_submissions=sum(r.review.invalid for r in results),
        replacements=sum(r.replacements for r in results),
        replacements_per_trial={r.trial_id: r.replacements for r in results},
        tokens={
            "student": {"input": student.input_tokens, "output": student.output_tokens},
            "reviewer": {"input": reviewer.input_tokens, "output": reviewer.output_tokens},
        },
        cost_usd=student.cost_usd + reviewer.cost_usd,
        wall_time_s=round(wall_time_s, 3),
        trial_wall_s=round(sum(r.wall_s for r in results), 3),
        exit_status=dict(Counter(r.exit_status for r in results)),
        exceptions=sum(1 for r in results if r.exception),
        infra_errors=sum(1 for r in results if r.outcome == Outcome.INFRA_ERROR),
        infra_retried=sum(r.attempt - 1 for r in results),
        isolation=_one_or_mixed({isolation_kind(r.isolation) for r in results if r.isolation}),
        isolations=dict(Counter(isolation_kind(r.isolation) for r in results if r.isolation)),
        outcomes=dict(Counter(r.outcome for r in results)),
        infra_cause=next((r.reason for r in results if r.outcome == Outcome.INFRA_ERROR), None),
        skipped_tasks=suite.skipped_tasks(),
        unscaffold_version=__version__,
    )
    for key, value in {**suite.describe(), **suite.metrics(tasks, per_task)}.items():
        setattr(summary, key, value)
    return summary
