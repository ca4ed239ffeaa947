"""Re-anchoring: at checkpoints, the current policy runs the validation tasks under the base harness and
every sibling, and the router learns again from those runs (the adaptive router rewrites its profiles,
the rule router swaps its table). Validation tasks only: a test task is refused before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from unscaffold.benchmarks.base import Suite, Task
from unscaffold.benchmarks.splits import refuse_test_tasks
from unscaffold.llm.hf_backend import HFModel
from unscaffold.minimal_harness.sandbox.base import DEFAULT_COMMAND_TIMEOUT_S
from unscaffold.rescue.validation import ValidationTable, table_from_runs


class _Provider:
    """One local model shared by every validation trial."""

    def __init__(self, model: HFModel) -> None:
        self.model, self.spec = model, model.spec

    def for_trial(self, task_id: str) -> HFModel:
        return self.model


class Reanchor(BaseModel):
    """Runs the validation tasks with a checkpoint of the policy and returns the new table."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    suite: Suite
    tasks: list[Task]
    harnesses: dict[str, Any]  # name -> Harness
    model_path: Path
    out: Path
    sandbox: str = "local"
    max_turns: int = 10
    temperature: float = 1.0  # the training rollouts' sampling, so the router learns from the policy as it trains
    max_new_tokens: int = 512
    command_timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S
    trials: int = 0  # validation rollouts run so far (part of the training's cost)

    def check(self) -> None:
        refuse_test_tasks(((t.id, t.split) for t in self.tasks), "--reanchor-tasks", "a router")

    def run(self, step: int, adapter: Path) -> ValidationTable:
        from unscaffold.run.folder import RunFolder
        from unscaffold.run.models import RunConfig
        from unscaffold.run.trial import TrialContext, run_trial

        self.check()
        model = HFModel(f"hf:{self.model_path}+{adapter}", str(self.model_path), adapter=str(adapter),
                        max_new_tokens=self.max_new_tokens, temperature=self.temperature)
        provider = _Provider(model)
        runs = {}
        for name, harness in self.harnesses.items():
            run_dir = self.out / f"step-{step}" / name
            config = RunConfig(suite=self.suite.name, student=model.spec, out=run_dir, sandbox=self.sandbox,
                               max_turns=self.max_turns, command_timeout_s=self.command_timeout_s,
                               finish_checks=False)  # as the training rollouts meet their harness
            for task in self.tasks:
                trial_dir = RunFolder(run_dir).trial(task.id).root
                trial_dir.mkdir(parents=True, exist_ok=True)
                run_trial(self.suite, task, task.id, trial_dir, provider, config, TrialContext(harness=harness))
                self.trials += 1
            runs[name] = run_dir
        return table_from_runs(runs, {t.id: t.instruction for t in self.tasks}, {t.id: t.split for t in self.tasks})
