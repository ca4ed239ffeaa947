"""The settings `rescue train` and `rescue route` share (a pool, a router and what it reads), each declared
once, and the settings of each `rescue` command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

from unscaffold.flags import Concurrency, DataFolder, SplitFile, TaskIds, Trials, flag
from unscaffold.minimal_harness.sandbox.base import SandboxChoice
from unscaffold.passthrough import PassThrough
from unscaffold.specs import ModelSpec, read_as

PoolFile = Annotated[Path | None, Field(description="pool.toml (default: the suite's shipped pool).",
                                        json_schema_extra=flag("--pool"))]
ValidationTable = Annotated[Path | None, Field(description="Validation table JSON (rule, adaptive).",
                                               json_schema_extra=flag("--validation"))]
Profilers = Annotated[list[Annotated[ModelSpec, read_as(ModelSpec, "--profiler")]], Field(
    default_factory=list, description="Model spec writing adaptive profiles (repeat).",
    json_schema_extra=flag("--profiler", repeat=True))]
Voters = Annotated[list[Annotated[ModelSpec, read_as(ModelSpec, "--voter")]], Field(
    default_factory=list, description="Model spec voting (repeat; default: the profilers).",
    json_schema_extra=flag("--voter", repeat=True))]


# What `rescue train` builds TRL's GRPOConfig and PEFT's LoraConfig from itself; `--trl` / `--peft` give any other
# field (e.g. `--trl vllm_gpu_memory_utilization=0.5` for colocated vLLM on a shared GPU).
RESCUE_TRL = PassThrough("--trl", "trl.GRPOConfig", set_by={
    "output_dir": "--out", "num_generations": "--k",
    "per_device_train_batch_size": "--k, --tasks-per-step and --steps-per-generation",
    "gradient_accumulation_steps": "a generation batch is split into --steps-per-generation optimiser steps",
    "max_steps": "--max-steps", "learning_rate": "--learning-rate",
    "loss_type": "the published objective (rescue/objective.py)", "beta": "the published objective has no KL term",
    "epsilon": "--eps-low", "epsilon_high": "--eps-high", "steps_per_generation": "--steps-per-generation",
    "num_iterations": "--num-iterations", "vllm_importance_sampling_correction": "--use-vllm",
    "vllm_importance_sampling_mode": "the published correction truncates per token",
    "vllm_importance_sampling_clip_max": "--correction-cap", "max_completion_length": "--max-completion-length",
    "max_tool_calling_iterations": "--max-turns", "temperature": "--temperature", "use_vllm": "--use-vllm",
    "vllm_mode": "--vllm-mode", "seed": "--seed",
    "save_strategy": "the adapter is saved at the end, checkpoints only to re-anchor",
    "use_cpu": "the CPU exactly when no GPU is visible",
}, defaults=frozenset({"logging_steps", "report_to", "bf16", "disable_tqdm"}))
RESCUE_PEFT = PassThrough("--peft", "peft.LoraConfig", set_by={
    "r": "--lora-r", "lora_alpha": "--lora-alpha", "target_modules": "every linear layer, as the SFT recipe",
    "task_type": "a causal language model"})


def default_router(router: str | None, validation: Path | None) -> str:
    """The validation-rule router where validation runs exist (the public default), else random."""
    return router or ("rule" if validation else "random")


class RouteConfig(BaseModel):
    """Everything `unscaffold rescue route` is told; each task runs as in `unscaffold run`, under the harness
    the router ranks first."""

    suite: str = Field(description="Suite to run.")
    student: Annotated[ModelSpec, read_as(ModelSpec, "--student", oracle=True)] = Field(
        description="Model spec or `oracle`.", json_schema_extra=flag("--student"))
    out: Path = Field(description="Run folder: results.json, routing.json, by-harness/NAME runs.",
                      json_schema_extra=flag("--out"))
    pool: PoolFile = None
    router: str | None = Field(None, description="random, rule, adaptive, or the router.json a `rescue train` left "
                               "(the trained router) (default: rule with --validation, else random).",
                               json_schema_extra=flag("--router"))
    validation: ValidationTable = None
    profilers: Profilers
    voters: Voters
    split: str | None = Field(None, description="train or test.", json_schema_extra=flag("--split"))
    data: DataFolder = None
    split_file: SplitFile = None
    task_ids: TaskIds = None
    trials: Trials = 1
    concurrency: Concurrency = 1
    sandbox: SandboxChoice = "local"
    seed: int = Field(0, description="Seed of the random router.", json_schema_extra=flag("--seed"))


class ValidationRuns(BaseModel):
    """Everything `unscaffold rescue validation` is told: which run holds each harness's validation trials."""

    suite: str = Field(description="The suite the runs are of.")
    runs: list[str] = Field(description="HARNESS=RUN_DIR: a run of the validation tasks under `base` or a sibling "
                            "(repeat the option).", json_schema_extra=flag("--run", repeat=True))
    out: Path = Field(description="Validation table JSON to write (--validation of train and route).",
                      json_schema_extra=flag("--out"))
    data: DataFolder = None
    split_file: SplitFile = None


class Knobs(BaseModel):
    """The world `rescue simulate` simulates (rescue/simulate.py); fields with a `flag` are its options."""

    locality: float = Field(0.8, ge=0, le=1, description="How task-specific siblings' effects are.",
                            json_schema_extra=flag("--locality"))
    complementarity: float = Field(0.8, ge=0, le=1, description="How different the causes siblings repair are.",
                                   json_schema_extra=flag("--complementarity"))
    nonstationarity: float = Field(0.15, ge=0, description="Drift of sibling effects per step.",
                                   json_schema_extra=flag("--nonstationarity"))
    improvement: float = Field(0.25, ge=0, description="Logit gained by a task per effective group.",
                               json_schema_extra=flag("--improvement"))
    transfer: float = Field(0.5, ge=0, le=1, description="Share of what a rescue group under siblings teaches that "
                            "carries back to the base harness.", json_schema_extra=flag("--transfer"))
    tasks: int = 96
    validation_tasks: int = 48
    causes: int = 10
    siblings: int = 20
    k: int = 8
    steps: int = Field(20, ge=1, description="Steps simulated.", json_schema_extra=flag("--steps"))
    base_logit: float = -2.5
    gain: float = Field(2.5, description="logit a sibling adds on tasks of each of the 2 causes it repairs")
    harm: float = Field(3.5, description="logit it takes from tasks of each of the 2 causes it breaks")
    rule_precision: float = Field(0.6, ge=0, le=1, description="Input: share of the rule router's nearest "
                                  "validation tasks sharing the task's cause.",
                                  json_schema_extra=flag("--rule-precision"))
    adaptive_precision: float = Field(0.85, ge=0, le=1, description="Input: the same for each adaptive voter.",
                                      json_schema_extra=flag("--adaptive-precision"))
    voters: int = 3
    neighbours: int = 5
    validation_trials: int = 2
    reanchor_every: int = 5
    repeats: int = Field(4, ge=1, description="Worlds averaged per figure.", json_schema_extra=flag("--repeats"))


class SimulateSettings(BaseModel):
    """Everything `unscaffold rescue simulate` is told: the world's knobs and where the results go."""

    seed: int = Field(0, description="Random seed.", json_schema_extra=flag("--seed"))
    as_json: bool = Field(False, description="Print the results as JSON on stdout.", json_schema_extra=flag("--json"))
    out: Path | None = Field(None, description="Folder for simulation.json and simulation.html.",
                             json_schema_extra=flag("--out"))
    knobs: Knobs = Field(default_factory=Knobs)


class PoolSettings(BaseModel):
    """Everything `unscaffold rescue pool` is told."""

    pool: Path = Field(description="A pool.toml, or a suite name for its shipped pool.")
    out: Path = Field(description="Folder to write each sibling's bank into.", json_schema_extra=flag("--out"))
