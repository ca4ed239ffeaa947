"""The validation table routers learn from: per validation task, its text and each harness's rewards.

Only validation tasks may feed a router (test tasks never do): a table holding a task of the test
split is refused when loaded. Built from run folders of the same validation tasks, one per harness
(`base` and each sibling), or read from a JSON file of the same shape."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, field_validator

from unscaffold.benchmarks.splits import FORBIDDEN_SPLIT
from unscaffold.errors import InputError
from unscaffold.iojson import read_json, validation_error
from unscaffold.rescue.groups import SUCCESS

WORD = re.compile(r"[a-z0-9_]+")


class ValidationTask(BaseModel):
    task_id: str
    text: str = Field(description="the task instruction (routers compare tasks by it)")
    split: str = "validation"
    rewards: dict[str, list[float]] = Field(description="harness (`base` or a sibling) -> rewards of its trials")
    transcripts: dict[str, str] = Field(default_factory=dict, description="harness -> what the student did "
                                        "(its commands), for the adaptive router's paired comparisons")

    @field_validator("split")
    @classmethod
    def _not_test(cls, value: str) -> str:
        if value == FORBIDDEN_SPLIT:
            raise ValueError("test tasks never feed a router; use validation (or train) tasks")
        return value

    def success_rate(self, harness: str, success: float = SUCCESS) -> float | None:
        rewards = self.rewards.get(harness)
        if not rewards:
            return None
        return sum(r >= success for r in rewards) / len(rewards)


class ValidationTable(BaseModel):
    tasks: list[ValidationTask]

    def harnesses(self) -> list[str]:
        return sorted({h for t in self.tasks for h in t.rewards})


def words(text: str) -> frozenset[str]:
    return frozenset(WORD.findall(text.lower()))


def similarity(a: str, b: str) -> float:
    """Jaccard overlap of the two texts' lower-cased word sets: deterministic and model-free."""
    wa, wb = words(a), words(b)
    return len(wa & wb) / len(wa | wb) if wa or wb else 0.0


def load_table(path: Path) -> ValidationTable:
    try:
        return ValidationTable.model_validate(read_json(path))
    except ValidationError as e:
        raise validation_error(str(path), e) from None


def table_from_runs(runs: dict[str, Path], texts: dict[str, str], splits: dict[str, str | None]) -> ValidationTable:
    """Join run folders (harness name -> RUN_DIR) of the same validation tasks into one table."""
    from unscaffold.llm.types import assistant_calls, command_of
    from unscaffold.run.folder import RunFolder, TrialFolder

    rewards: dict[str, dict[str, list[float]]] = {}
    transcripts: dict[str, dict[str, str]] = {}
    for harness, run_dir in runs.items():
        folder = RunFolder(run_dir)
        finished = folder.finished_trials()
        if not finished:
            raise InputError(str(run_dir), None, f"no {folder.TRIALS}/*/{TrialFolder.RESULT}: not a run folder")
        for trial in finished:
            r = trial.read_result()
            if splits.get(r.task_id) == FORBIDDEN_SPLIT:
                raise InputError(str(trial.result), "task_id", f"{r.task_id} is a test task; test tasks never feed "
                                 "a router")
            rewards.setdefault(r.task_id, {}).setdefault(harness, []).append(r.reward)
            if harness not in transcripts.get(r.task_id, {}) and (traj := trial.read_trajectory()) is not None:
                calls = assistant_calls(traj.messages[traj.opening_messages:])  # not a worked example's
                lines = [command_of(c) or f"{c.name}({c.arguments})" for c in calls]
                transcripts.setdefault(r.task_id, {})[harness] = "\n".join(f"$ {c[:300]}" for c in lines)[:3000]
    return ValidationTable(tasks=[
        ValidationTask(task_id=t, text=texts.get(t, t), split=splits.get(t) or "validation", rewards=rewards[t],
                       transcripts=transcripts.get(t, {}))
        for t in sorted(rewards)
    ])
