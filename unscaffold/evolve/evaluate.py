"""Running the student under a bank on train tasks, through the runner's public `run(RunConfig)`.

Each evaluation has its own run folder under DIR/runs/, so an interrupted evolution resumes each one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from unscaffold.evolve.budget import check_budget
from unscaffold.evolve.config import EvolveConfig
from unscaffold.outcomes import Outcome
from unscaffold.run.folder import RunFolder
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import RunStalled, run


class Evaluator:
    def __init__(self, config: EvolveConfig, progress: Callable[[str], None] = lambda _: None) -> None:
        self.config, self.progress = config, progress
        self.runs = config.out / "runs"

    def run_dir(self, name: str) -> Path:
        return self.runs / name

    def evaluate(self, name: str, bank: Path, task_ids: list[str], trials: int = 1) -> dict[str, list[float]]:
        """Task id -> the reward of each trial, for the student under `bank` on these train tasks."""
        c = self.config
        if not task_ids:
            return {}
        if not RunFolder(self.run_dir(name)).results.exists():
            check_budget(c.out, c.budget)
            self.progress(f"student under {Path(bank).name}: {len(task_ids)} tasks x {trials} (runs/{name})")
        config = RunConfig(
            suite=c.suite, student=c.student, out=self.run_dir(name), data=c.data, split=c.split,
            split_file=c.split_file, task_ids=sorted(task_ids), trials=trials, concurrency=c.concurrency,
            sandbox=c.sandbox,
            harness=str(Path(bank).resolve()), max_turns=c.max_turns, command_timeout_s=c.command_timeout_s,
            price_in_per_mtok=c.budget.price_in_per_mtok, price_out_per_mtok=c.budget.price_out_per_mtok,
        )
        summary = run(config)
        if summary.n_trials and summary.outcomes.get(Outcome.INFRA_ERROR, 0) == summary.n_trials:  # nothing to learn
            raise RunStalled(f"the student could not run (runs/{name}): {summary.infra_cause}")
        rewards: dict[str, list[float]] = {t: [] for t in sorted(task_ids)}
        for result in RunFolder(self.run_dir(name)).read_trial_results():
            rewards[result.task_id].append(result.reward)
        return rewards


def first(rewards: dict[str, list[float]]) -> dict[str, float]:
    """One sample per task (the first trial)."""
    return {t: r[0] for t, r in rewards.items() if r}
