"""What a run is, read from its own records: the model (base, or an adapter and the recipe that trained
it), the harness (h, h*, another bank) and a reviewer if any. Users never retype labels.

A trained model says what it is through the files its trainer leaves: `train-sft` writes
`train_log.jsonl` and `summary.json` into the adapter folder (distilled); `rescue train` writes
`metrics.jsonl` and `summary.json` (with its `method`) beside `OUT/adapter` (rescue-trained). A run
whose config names a `router` (harness chosen per task at inference, Rank-1) is labelled routed. A
model served elsewhere (e.g. a LoRA behind vLLM, where the spec names no adapter) is described by `RUN/model.json`
(`{"kind": ..., "base"?, "adapter"?, "note"?}`), which wins over everything else."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unscaffold.errors import UnscaffoldError
from unscaffold.iojson import load_model, read_json, validation_error
from unscaffold.specs import HarnessSpec, ModelSpec, ReviewerSpec
from unscaffold.training_record import RECORD_KEY, TrainingRecord

MODEL_RECORD = "model.json"


class ModelRecord(BaseModel):
    """`RUN/model.json`: what the student of this run is, when its spec cannot say."""

    model_config = ConfigDict(extra="forbid")
    kind: str = Field(min_length=1, description="base, distilled, rescue-trained, routed, ...")
    base: str | None = None
    adapter: str | None = None
    note: str | None = None


class Training(BaseModel):
    """How the adapter was trained, as far as its folder records it."""

    recipe: str
    method: str | None = Field(None, description="rescue: none, same, fixed, random, rule or adaptive")
    steps: int | None = None
    rollouts: int | None = Field(None, description="student rollouts the training generated")
    wall_s: float | None = None
    effective_group_rate: float | None = Field(None, description="rescue: share of trained groups with a success "
                                               "and a failure")
    extra_rollout_pct: float | None = Field(None, description="rescue: rollouts beyond plain GRPO, in percent")
    data_sources: dict[str, int] = Field(default_factory=dict, description="sft: rows per build-sft `source` label")
    record: TrainingRecord | None = Field(None, description="base model, train tasks, settings, full cost")

    @property
    def trained(self) -> bool:
        """False where the trainer recorded that no update moved the weights."""
        return self.record is None or self.record.trained


class RunLabel(BaseModel):
    kind: str = Field(description="base, distilled, rescue-trained, tuned (adapter of unknown origin), oracle")
    model: str = Field(description="the base model (spec without adapter)")
    adapter: str | None = None
    harness: str = Field(description="h, h*, h* (bank NAME) or routed (ROUTER)")
    reviewer: str | None = None
    training: Training | None = None

    @property
    def text(self) -> str:
        return f"{self.kind} + {self.harness}" + (" + reviewer" if self.reviewer else "")


def _jsonl(path: Path) -> list[dict]:
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise UnscaffoldError(f"{path}: line {i + 1}: invalid JSON: {e.msg}") from None
    return rows


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def rescue_folder(adapter: Path) -> Path | None:
    """The `rescue train` output an adapter belongs to: the folder itself, or OUT for OUT/adapter."""
    for folder in (adapter, adapter.parent if adapter.name == "adapter" else None):
        if folder is not None and (folder / "metrics.jsonl").is_file():
            return folder
    return None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _record(summary: Path, data: object) -> TrainingRecord | None:
    """summary.json's training record, where the trainer wrote one."""
    raw = data.get(RECORD_KEY) if isinstance(data, dict) else None
    if raw is None:
        return None
    try:
        return TrainingRecord.model_validate(raw)
    except ValidationError as e:
        raise validation_error(str(summary), e, prefix=RECORD_KEY) from None


def training_of(adapter: Path) -> Training | None:
    """Read the trainer's own files for an adapter folder; None when none is there."""
    folder = rescue_folder(adapter)
    if folder is not None:
        rows = _jsonl(folder / "metrics.jsonl")
        summary = read_json(folder / "summary.json") if (folder / "summary.json").is_file() else {}
        summary = summary if isinstance(summary, dict) else {}
        method = summary.get("method") or summary.get("router")
        record = _record(folder / "summary.json", summary)
        return Training(recipe="rescue", method=str(method) if method else None, record=record,
                        steps=record.cost.optimiser_steps if record else max((_int(r.get("step")) or 0 for r in rows),
                                                                             default=0),
                        rollouts=sum(_int(r.get("rollouts")) or 0 for r in rows),
                        wall_s=_number(summary.get("wall_s")),
                        effective_group_rate=_number(summary.get("effective_group_rate")),
                        extra_rollout_pct=_number(summary.get("extra_rollout_pct")))
    if (adapter / "summary.json").is_file() or (adapter / "train_log.jsonl").is_file():
        summary = read_json(adapter / "summary.json") if (adapter / "summary.json").is_file() else {}
        steps = _int(summary.get("steps")) if isinstance(summary, dict) else None
        if steps is None and (adapter / "train_log.jsonl").is_file():
            steps = max((_int(r.get("step")) or 0 for r in _jsonl(adapter / "train_log.jsonl")), default=0)
        wall = _number(summary.get("train_seconds")) if isinstance(summary, dict) else None
        sources = summary.get("data_sources") if isinstance(summary, dict) else None
        sources = {str(k): v for k, v in sources.items() if _int(v)} if isinstance(sources, dict) else {}
        return Training(recipe="sft", steps=steps, wall_s=wall, data_sources=sources,
                        record=_record(adapter / "summary.json", summary))
    return None


def router_name(router: str) -> str:
    """A router by name, or a trained one (`rescue train`'s router.json) by the router its state records."""
    if not router.endswith(".json"):
        return router
    state = read_json(Path(router)) if Path(router).is_file() else {}
    name = state.get("router") if isinstance(state, dict) else None
    return f"{name}, trained" if isinstance(name, str) else "trained"


def harness_label(harness: HarnessSpec, router: str | None = None) -> str:
    if router:
        return f"routed ({router_name(router)})"
    if harness.kind in ("minimal", "hstar"):
        return {"minimal": "h", "hstar": "h*"}[harness.kind]
    return f"h* ({Path(str(harness.path)).name})"


def kind_of(training: Training | None) -> str:
    if training is None:
        return "tuned"
    if training.recipe == "sft":
        return "distilled"
    return "rescue-trained" if training.recipe == "rescue" else "tuned"


def label_run(run_dir: Path, config: dict) -> RunLabel:
    """The run's label from its records (`config.json` as written, by this version or an earlier one that
    holds the specs' text; `model.json` if present; adapter files)."""
    reviewer = config.get("reviewer")
    common = {"harness": harness_label(HarnessSpec.model_validate(config.get("harness", "minimal")),
                                       config.get("router")),
              "reviewer": str(ReviewerSpec.model_validate(reviewer)) if reviewer else None}
    if (Path(run_dir) / MODEL_RECORD).is_file():
        record = load_model(Path(run_dir) / MODEL_RECORD, ModelRecord)
        training = training_of(Path(record.adapter)) if record.adapter and Path(record.adapter).is_dir() else None
        model = record.base or str(ModelSpec.model_validate(config.get("student", "")))
        return RunLabel(kind=record.kind, model=model, adapter=record.adapter,
                        training=training, **common)
    spec = ModelSpec.model_validate(config.get("student", ""))
    if spec.kind == "oracle":
        return RunLabel(kind="oracle", model="oracle", **common)
    model = f"hf:{spec.target}" if spec.kind == "hf" else str(spec)  # generation options are evaluation settings
    if spec.adapter is None:
        return RunLabel(kind="base", model=model, **common)
    adapter = Path(spec.adapter)
    training = training_of(adapter) if adapter.is_dir() else None
    return RunLabel(kind=kind_of(training), model=model, adapter=spec.adapter, training=training, **common)
