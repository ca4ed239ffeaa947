"""The settings of one evolution; re-running with the same settings resumes it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from unscaffold.evolve.budget import Budget
from unscaffold.flags import Concurrency, DataFolder, SplitFile, TaskIds, flag
from unscaffold.minimal_harness.agent import DEFAULT_MAX_TURNS, MaxTurns
from unscaffold.minimal_harness.sandbox.base import DEFAULT_COMMAND_TIMEOUT_S, CommandTimeout, SandboxChoice
from unscaffold.specs import ModelSpec, read_as
from unscaffold.suites import suite_help

SPECS = ("student", "editor", "analyst")


class EvolveConfig(BaseModel):
    """Everything `unscaffold evolve` is told; fields with a `flag` are its options."""

    suite: str = Field(description=suite_help())
    student: Annotated[ModelSpec, read_as(ModelSpec, "--student", oracle=True)] = Field(
        description="Model spec of the student.", json_schema_extra=flag("--student"))
    editor: Annotated[ModelSpec, read_as(ModelSpec, "--editor")] = Field(
        description="Model spec (or replay:FILE) that edits the bank.", json_schema_extra=flag("--editor"))
    analyst: Annotated[ModelSpec | None, read_as(ModelSpec, "--analyst")] = Field(
        None, description="Model spec that groups failures (default: --editor).", json_schema_extra=flag("--analyst"))
    base: Path = Field(description="The h* bank to start from.", json_schema_extra=flag("--base"))
    out: Path = Field(description="Evolution folder (re-running resumes it).", json_schema_extra=flag("--out"))
    data: DataFolder = None
    mode: Literal["single", "pool"] = "single"
    rounds: int = Field(3, ge=1, description="Rounds of failure analysis (three, as published for Harness-Zero).",
                        json_schema_extra=flag("--rounds"))
    single: bool = Field(False, exclude=True, description="One shared h* (the default).",
                         json_schema_extra=flag("--single"))
    pool: int | None = Field(None, ge=1, exclude=True, description="Evolve a sibling pool of at most N children.",
                             json_schema_extra=flag("--pool"))
    pool_size: int = Field(8, ge=1, description="--pool N: children to evolve at most")
    parents: int = Field(2, ge=1, description="--pool: parents expanded per round, chosen by joint coverage.",
                         json_schema_extra=flag("--parents"))
    split: str = Field("train", description="The split evolution learns from (test tasks are never read).",
                       json_schema_extra=flag("--split"))
    split_file: SplitFile = None
    protocol: Literal["gated", "paper"] = Field("gated", description="--single: gated (an edit stays only if it "
                                                "repairs more train tasks than it breaks) or paper (the recipe's "
                                                "loop: previous failures only, passed tasks leave, no gate).",
                                                json_schema_extra=flag("--protocol"))
    task_ids: TaskIds = None
    concurrency: Concurrency = 1
    sandbox: SandboxChoice = "local"
    max_turns: MaxTurns = DEFAULT_MAX_TURNS
    command_timeout_s: CommandTimeout = DEFAULT_COMMAND_TIMEOUT_S
    budget: Budget = Field(default_factory=Budget)

    @model_validator(mode="after")
    def _pool_option(self) -> EvolveConfig:
        """`--pool N` chooses the pool mode and its size."""
        if self.pool is not None:
            self.mode, self.pool_size = "pool", self.pool
        return self

    @property
    def analyst_spec(self) -> ModelSpec:
        return self.analyst or self.editor

    def identity(self) -> dict[str, Any]:
        """What makes two invocations the same evolution (the budget and concurrency may change); the model
        specs as their text, as every version's config.json gives them."""
        dumped = self.model_dump(mode="json", exclude={"budget", "concurrency", "out"})
        return {**dumped, **{name: str(spec) if (spec := getattr(self, name)) else None for name in SPECS}}
