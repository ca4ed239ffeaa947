"""What every training output records beside its adapter, in one set of units for both recipes.

`train-sft` and `rescue train` each write a `record` into their `summary.json`: the base model, the train
task ids, the settings its rollouts were scored under, whether any update moved the weights, and the full
cost (rollouts of every kind, reviewer and router calls with their tokens, optimiser steps, generation
batches, CPU and GPU seconds). `compare` reads the same record for both, so a distilled row carries its
collection's reviewer calls and a rescue row its filler and re-anchoring rollouts, and rows that were
trained from another base model or on other tasks are marked instead of ranked."""

from __future__ import annotations

import resource
import time
from typing import Any, Literal

from pydantic import BaseModel, Field

RECORD_KEY = "record"  # the key of summary.json that holds a TrainingRecord
ROLLOUT_KINDS = ("collection", "base", "rescue", "filler", "reanchor", "validation")


class Rollouts(BaseModel):
    """Student rollouts a training spent, by kind (each an episode of the policy on a task)."""

    collection: int = Field(0, description="reviewed collection trials the SFT data came from")
    base: int = Field(0, description="rescue: rollouts under the base harness (what plain GRPO samples)")
    rescue: int = Field(0, description="rescue: rollouts under the router's siblings that replaced failed groups")
    filler: int = Field(0, description="rescue: rollouts sampled only to give every process an equal share")
    reanchor: int = Field(0, description="rescue: validation runs of checkpoints that re-anchored the router")
    validation: int = Field(0, description="validation runs the router's table was built from")

    @property
    def total(self) -> int:
        return sum(getattr(self, kind) for kind in ROLLOUT_KINDS)


class TrainingCost(BaseModel):
    rollouts: Rollouts = Field(default_factory=Rollouts)
    reviewer_calls: int = 0
    reviewer_tokens: dict[str, int] = Field(default_factory=dict)
    replacements: int = 0
    router_calls: int = Field(0, description="LLM calls of the router (profiling and votes)")
    router_tokens: dict[str, int] = Field(default_factory=dict)
    optimiser_steps: int = 0
    generation_batches: int = Field(0, description="rescue: batches of rollouts generated (SFT: 0)")
    cpu_s: float = Field(0.0, description="CPU seconds of the training process and its children")
    gpu_s: float = Field(0.0, description="GPU seconds: wall seconds times the GPUs held")
    wall_s: float = 0.0


class TrainingRecord(BaseModel):
    """`summary.json["record"]` of a training output."""

    recipe: Literal["sft", "rescue"]
    method: str | None = Field(None, description="rescue: the router or control")
    base_model: str = Field(description="the model as the command was given it (`tiny-wide`, a path)")
    base_model_path: str = Field(description="the folder it resolved to")
    suite: str | None = None
    train_tasks: list[str] = Field(description="the task ids the recipe drew its training rollouts from")
    evaluation: dict[str, Any] = Field(description="the settings its training rollouts were scored under")
    seed: int | None = None
    trained: bool = Field(description="whether any update moved the weights")
    not_trained_reason: str | None = None
    cost: TrainingCost
    warm_start: str | None = Field(None, description="the adapter training started from; its cost is included")
    passed_through: dict[str, dict[str, Any]] = Field(default_factory=dict, description="fields given to TRL's "
                                                      "and PEFT's configs as they are, by flag (`--trl`, `--peft`)")
    notes: list[str] = Field(default_factory=list, description="what the record could not count")


def add_tokens(total: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    return {k: total.get(k, 0) + more.get(k, 0) for k in sorted({*total, *more})}


class Clock:
    """CPU and wall seconds from its start (CPU of this process and of the children it waited for)."""

    def __init__(self) -> None:
        self.wall0, self.cpu0 = time.monotonic(), self._cpu()

    @staticmethod
    def _cpu() -> float:
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    def seconds(self) -> tuple[float, float, float]:
        """(wall, CPU, GPU) seconds so far; GPU seconds count every visible GPU as held."""
        import torch

        wall = time.monotonic() - self.wall0
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return round(wall, 3), round(self._cpu() - self.cpu0, 3), round(wall * gpus, 3)


def collection_cost(runs: list[Any]) -> tuple[TrainingCost, list[str]]:
    """The cost of reviewed collection runs (RunResults) and the task ids they ran."""
    cost = TrainingCost()
    tasks: set[str] = set()
    for r in runs:
        cost.rollouts.collection += r.n_trials
        cost.reviewer_calls += r.reviewer_calls
        cost.replacements += r.replacements
        cost.reviewer_tokens = add_tokens(cost.reviewer_tokens, r.tokens.get("reviewer", {}))
        cost.wall_s += r.wall_time_s
        tasks |= set(r.per_task)
    return cost, sorted(tasks)


def evaluation_settings(config: Any) -> dict[str, Any]:
    """What a run (RunConfig) scored its trials under, beside which two runs' scores are comparable."""
    spec = config.student if config.student.kind != "oracle" else None
    return {"suite": config.suite, "trials": config.trials, "max_turns": config.agent.max_turns,
            "max_format_errors": config.agent.max_format_errors, "command_timeout_s": config.sandbox.command_timeout_s,
            "opening": config.opening, "finish_checks": config.finish_checks,
            "max_new_tokens": spec.max_new_tokens if spec else None,
            "temperature": (spec.sampling.temperature if spec else None)
            or getattr(getattr(config, "sampling", None), "temperature", None)}


def sft_record(data: Any, model: str, base_path: str, steps: int, seed: int, clock: Clock,
               changed: bool, passed: dict[str, dict[str, Any]] | None = None) -> TrainingRecord:
    """The record of a `train-sft` run: the collection runs its data came from (through build-sft's report
    beside the data) are part of its cost, and their tasks are its train tasks."""
    from pathlib import Path

    from unscaffold.errors import InputError
    from unscaffold.iojson import read_json
    from unscaffold.run.folder import RunFolder
    from unscaffold.run.models import RunConfig, RunResults
    from unscaffold.sft.build import report_path

    notes: list[str] = []
    runs: list[RunResults] = []
    configs: list[RunConfig] = []
    report = report_path(Path(data))
    if report.is_file():
        raw = read_json(report)
        for run in raw.get("runs", []) if isinstance(raw, dict) else []:
            folder = RunFolder(run)
            try:
                runs.append(folder.read_results())
                configs.append(folder.read_config())
            except InputError:
                notes.append(f"collection run {run}: no readable {folder.RESULTS}/{folder.CONFIG}; its cost is not "
                             "counted")
    else:
        notes.append(f"{report.name} not found beside the data: the collection's cost is not counted")
    cost, tasks = collection_cost(runs)
    if not runs:
        import json

        rows = [json.loads(line) for line in Path(data).read_text(encoding="utf-8").splitlines() if line.strip()]
        tasks = sorted({str(r["task_id"]) for r in rows if isinstance(r, dict) and r.get("task_id") is not None})
    wall, cpu, gpu = clock.seconds()
    cost.optimiser_steps, cost.cpu_s, cost.gpu_s = steps, cpu, gpu
    cost.wall_s = round(cost.wall_s + wall, 3)
    evaluation = evaluation_settings(configs[0]) if configs else {}
    return TrainingRecord(recipe="sft", base_model=model, base_model_path=base_path,
                          suite=configs[0].suite if configs else None, train_tasks=tasks, evaluation=evaluation,
                          seed=seed, trained=changed and steps > 0,
                          not_trained_reason=None if changed and steps > 0 else "no update moved the weights",
                          cost=cost, notes=notes, passed_through=passed or {})


def lora_b(model: Any) -> dict[str, Any]:
    """A copy of the model's LoRA B matrices, to tell afterwards whether training moved them."""
    return {name: p.detach().clone() for name, p in model.named_parameters() if "lora_B" in name}


def lora_moved(model: Any, before: dict[str, Any] | None = None) -> bool:
    """Whether any LoRA B matrix left where it started: zero (where PEFT starts a fresh adapter, so an adapter
    with all-zero B is the base model) or, for a warm start, the copy taken before training."""
    for name, p in model.named_parameters():
        if "lora_B" not in name:
            continue
        start = before.get(name) if before is not None else None
        if (float(p.detach().abs().sum()) > 0) if start is None else not bool((p.detach() == start).all()):
            return True
    return False


def add_costs(a: TrainingCost, b: TrainingCost) -> TrainingCost:
    """Two trainings' costs as one (a warm start and the training that continued it)."""
    rollouts = Rollouts(**{kind: getattr(a.rollouts, kind) + getattr(b.rollouts, kind) for kind in ROLLOUT_KINDS})
    return TrainingCost(
        rollouts=rollouts, reviewer_calls=a.reviewer_calls + b.reviewer_calls,
        reviewer_tokens=add_tokens(a.reviewer_tokens, b.reviewer_tokens), replacements=a.replacements + b.replacements,
        router_calls=a.router_calls + b.router_calls, router_tokens=add_tokens(a.router_tokens, b.router_tokens),
        optimiser_steps=a.optimiser_steps + b.optimiser_steps, generation_batches=a.generation_batches
        + b.generation_batches, cpu_s=round(a.cpu_s + b.cpu_s, 3), gpu_s=round(a.gpu_s + b.gpu_s, 3),
        wall_s=round(a.wall_s + b.wall_s, 3))


def warm_start_record(adapter: Any) -> TrainingRecord:
    """The record of the training an adapter came from (`summary.json` beside it), to carry its cost on."""
    from pathlib import Path

    from unscaffold.errors import InputError
    from unscaffold.iojson import read_json

    summary = Path(adapter) / "summary.json"
    data = read_json(summary) if summary.is_file() else None
    raw = data.get(RECORD_KEY) if isinstance(data, dict) else None
    if raw is None:
        raise InputError("--init-adapter", None, f"{adapter}: no summary.json with a training record beside the "
                         "adapter; its cost could not be counted")
    return TrainingRecord.model_validate(raw)
