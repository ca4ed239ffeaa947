"""What a run writes to disk: its config, one result per trial, and the run summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from unscaffold.benchmarks.base import Outcome
from unscaffold.llm.types import Usage
from unscaffold.minimal_harness.sandbox.base import SandboxKind


class RunConfig(BaseModel):
    suite: str
    student: str
    out: Path
    data: Path | None = None
    split: str | None = None
    task_ids: list[str] | None = None
    trials: int = Field(1, ge=1)
    concurrency: int = Field(1, ge=1)
    sandbox: SandboxKind = "local"
    harness: str = Field("minimal", description="minimal, hstar (the suite's bank) or a bank folder")
    reviewer: str | None = Field(None, description="reviewer spec; with one the run is a collection")
    knowledge: Path | None = Field(None, description="K for the reviewer; default the suite's compiled K")
    budget: int = Field(5, ge=0, description="REPLACE decisions allowed per trial")
    reviewer_concurrency: int | None = Field(None, ge=1, description="reviewer calls in flight at once")
    infra_retries: int = Field(2, ge=0, description="re-runs of a trial whose machinery failed")
    max_turns: int = Field(40, ge=1)
    command_timeout_s: float = Field(60.0, gt=0)
    max_wall_s: float | None = Field(None, gt=0, description="per trial; a task's own limit wins when smaller")
    max_cost_usd: float | None = Field(None, gt=0, description="per trial, student model cost")
    price_in_per_mtok: float = Field(0.0, ge=0)
    price_out_per_mtok: float = Field(0.0, ge=0)

    def identity(self) -> dict[str, Any]:
        """The fields that make two invocations the same run (resume only continues the same run)."""
        return self.model_dump(mode="json", include={"suite", "student", "data", "split", "task_ids", "trials",
                                                     "harness", "reviewer", "knowledge", "budget", "max_turns"})


ERROR_OUTCOMES = ("environment_error", "environment_unsupported", "verifier_error", "infra_error")


class TrialResult(BaseModel):
    trial_id: str
    task_id: str
    scenario: str | None = None
    reward: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    outcome: Outcome = "failed"
    reason: str = Field("", description="why it scored what it did; empty only when passed")
    details: dict[str, Any] = Field(default_factory=dict)
    exit_status: str
    exception: str | None = None
    infra_error: bool = False
    attempt: int = 1
    turns: int = 0
    format_errors: int = 0
    replacements: int = 0
    reviewer_calls: int = 0
    reviewer_calls_saved: int = 0
    invalid_submissions: int = 0
    review_fallbacks: int = 0
    student_usage: Usage = Field(default_factory=Usage)
    reviewer_usage: Usage = Field(default_factory=Usage)
    isolation: str = ""
    wall_s: float = 0.0
    started_at: str
    ended_at: str


class RunResults(BaseModel):
    """`results.json`. Suite metrics (e.g. `tgc`, `sgc`) sit at the top level beside `pass_at_1`."""

    model_config = ConfigDict(extra="allow")
    suite: str
    student: str
    harness: str
    split: str | None
    n_tasks: int
    n_trials: int
    pass_at_1: float
    mean_reward: float
    per_task: dict[str, float]
    reviewer: str | None = None
    knowledge: str | None = None
    budget: int | None = None
    reviewer_calls: int = 0
    reviewer_calls_saved: int = 0
    invalid_submissions: int = 0
    replacements: int = 0
    replacements_per_trial: dict[str, int] = Field(default_factory=dict)
    tokens: dict[str, dict[str, int]] = Field(default_factory=dict)
    cost_usd: float = 0.0
    wall_time_s: float = 0.0
    trial_wall_s: float = 0.0
    exit_status: dict[str, int] = Field(default_factory=dict)
    exceptions: int = 0
    infra_errors: int = 0
    infra_retried: int = 0
    isolation: str = Field("", description="the trials' isolation, or `mixed: see isolations`")
    isolations: dict[str, int] = Field(default_factory=dict, description="trials per isolation")
    outcomes: dict[str, int] = Field(default_factory=dict, description="trials per outcome")
    infra_cause: str | None = Field(None, description="the first infrastructure failure's reason, if any")
    skipped_tasks: dict[str, str] = Field(default_factory=dict, description="tasks of the data that could not "
                                          "be read: id -> why")
    unscaffold_version: str
