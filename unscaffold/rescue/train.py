"""`unscaffold rescue train`: rescue GRPO of a model on a suite, with a frozen sibling pool and a router.

Each generation batch holds `tasks_per_step` groups of K rollouts and is split into
`steps_per_generation` optimiser steps (TRL's own buffering), so the policy moves between the first and
later steps and the clip acts; each line of metrics.jsonl is one generation batch. LoRA (rank 32,
alpha 32, all linear layers) as in the SFT recipe; the adapter is saved to OUT/adapter. Defaults follow
the published recipe where it states them (K = 8, eps_low 0.20, eps_high 0.28, no KL, correction cap 2,
several tasks per step); the objective is TRL's (objective.py).

Under `accelerate launch` every process runs this function: the generation batch (K x tasks_per_step rows)
is split evenly over the processes, the main process alone asks the router, writes the records and
re-anchors (the others wait for it at the next collective), and the rescue step gathers groups across ranks
(trl_rescue.py)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, model_validator

from unscaffold.benchmarks.base import Suite
from unscaffold.benchmarks.splits import refuse_test_tasks
from unscaffold.errors import InputError
from unscaffold.flags import DataFolder, SplitFile, TaskIds, comma_list_kept_empty, flag
from unscaffold.iojson import append_jsonl, write_json_atomic
from unscaffold.minimal_harness.agent import DEFAULT_MAX_TURNS, MaxTurns
from unscaffold.minimal_harness.sandbox.base import DEFAULT_COMMAND_TIMEOUT_S, CommandTimeout, SandboxChoice
from unscaffold.passthrough import PassedThrough, checked
from unscaffold.rescue.groups import SUCCESS, GroupOutcome, effective, step_stats
from unscaffold.rescue.objective import CORRECTION_CAP, EPS_HIGH, EPS_LOW, ObjectiveConfig, grpo_objective_args
from unscaffold.rescue.pool import BASE
from unscaffold.rescue.routers import ROUTERS, ControlRouter, Router, TaskView, default_top_k, pick, prefers_base
from unscaffold.rescue.settings import (
    RESCUE_PEFT,
    RESCUE_TRL,
    PoolFile,
    Profilers,
    ValidationTable,
    Voters,
    default_router,
)
from unscaffold.sft.config import LORA_ALPHA, LORA_RANK, RECIPE_SEED
from unscaffold.training_record import (
    Clock,
    Rollouts,
    TrainingCost,
    TrainingRecord,
    add_costs,
    lora_b,
    lora_moved,
    warm_start_record,
)

# Recipe scale. Harness-S trained GRPO on 2,560 base-harness rollouts (320 groups of K = 8): at 4 tasks per
# generation batch and 2 optimiser steps per batch that is 80 batches, 160 steps. The paper states no
# completion length; 16,384 tokens holds a multi-turn app-world episode with its tool observations.
RECIPE_STEPS = 160
RECIPE_COMPLETION_TOKENS = 16_384
METRICS = "metrics.jsonl"
ADAPTIVE_REANCHOR_EVERY = 10  # the adaptive router re-anchors by default, as the published method does
TRL_LOG = "trl_log.jsonl"  # TRL's own per-optimiser-step logs: loss, clip ratios, entropy
CONTROLS = ("none", "same", "fixed")  # the published controls beside the routers


def rescue_harnesses(router: Router, task: TaskView, k: int, top_k: int | None = None) -> list[str]:
    """The K harnesses of a rescue group: K times the base for `same`, else the router's top-k siblings,
    K / top-k rollouts each."""
    if router.name == "same":
        return [BASE] * k
    return pick(router, task, k, top_k)


def fixed_mixture(siblings: list[str], k: int) -> list[str]:
    """The published fixed-mixture control: every group's K rollouts spread over the base harness and the pool
    in pool order (cycling), whatever the task, with no rescue step."""
    order = [BASE, *siblings]
    return [order[i % len(order)] for i in range(k)]


class RescueTrainConfig(BaseModel):
    """Everything `unscaffold rescue train` is told; fields with a `flag` are its options."""

    suite: str = Field(description="Suite to train on.")
    model: str = Field(description="A local checkpoint folder, or `tiny` (the offline test model).",
                       json_schema_extra=flag("--model"))
    out: Path = Field(description="Run folder: metrics.jsonl, adapter/, summary.json, metrics.html.",
                      json_schema_extra=flag("--out"))
    pool: PoolFile = None
    router: Literal["none", "same", "fixed", "random", "rule", "adaptive"] = Field(
        "random", description="none (plain GRPO), same (re-sample under the base harness), fixed (the pool in "
        "order), random, rule or adaptive (default: rule with --validation, else random).",
        json_schema_extra=flag("--router", show_default=False))
    validation: ValidationTable = None
    profilers: Profilers
    voters: Voters
    split: str | None = Field("train", description="The split the tasks come from.",
                              json_schema_extra=flag("--split"))
    task_ids: TaskIds = None
    data: DataFolder = None
    split_file: SplitFile = None
    opening: str | None = Field(None, description="How an episode starts, as `run --opening` (default: the "
                                "suite's).", json_schema_extra=flag("--opening"))
    max_steps: int = Field(RECIPE_STEPS, ge=1, description="Optimiser steps (default: the published GRPO budget of "
                           "2,560 base rollouts at the default K, tasks per step and steps per generation; a toy "
                           "run on the CPU: --max-steps 2 --k 4 --tasks-per-step 1 --steps-per-generation 1 "
                           "--max-completion-length 48).", json_schema_extra=flag("--max-steps"))
    init_adapter: Path | None = Field(None, description="Start from this LoRA adapter (a `train-sft` output of "
                                      "the same model: a warm start) instead of a fresh one; its training's cost "
                                      "is counted in this run's record.", json_schema_extra=flag("--init-adapter"))
    k: int = Field(8, ge=2, description="Rollouts per task (the group size), and per rescue group.",
                   json_schema_extra=flag("--k"))
    top_k: int | None = Field(None, ge=1, description="Siblings the router picks per rescue group, each sampled "
                              "K / top-k times (default: 4 at K = 8, as the published 4 harnesses x 2 samples; "
                              "else the largest divisor of K up to 4).", json_schema_extra=flag("--top-k"))
    tasks_per_step: int = Field(4, ge=1, description="Tasks (groups) per generation batch, over all processes.",
                                json_schema_extra=flag("--tasks-per-step"))
    steps_per_generation: int = Field(2, ge=1, description="Optimiser steps per generation batch (> 1: the clip "
                                      "acts); K * tasks_per_step must divide by it.",
                                      json_schema_extra=flag("--steps-per-generation"))
    num_iterations: int = Field(1, ge=1, description="Passes over each generation batch.",
                                json_schema_extra=flag("--num-iterations"))
    learning_rate: float = Field(1e-5, gt=0, description="Peak learning rate.",
                                 json_schema_extra=flag("--learning-rate"))
    max_completion_length: int = Field(RECIPE_COMPLETION_TOKENS, ge=8, description="Tokens per rollout, tool "
                                       "observations included (default: room for a multi-turn app-world episode).",
                                       json_schema_extra=flag("--max-completion-length"))
    max_turns: MaxTurns = DEFAULT_MAX_TURNS  # h's turn limit and flag: a rollout has at most as many replies as a run
    temperature: float = Field(1.0, gt=0, description="Sampling temperature of the rollouts (and of re-anchoring).",
                               json_schema_extra=flag("--temperature"))
    lora_r: int = Field(LORA_RANK, ge=1, description="LoRA rank (all linear layers).",
                        json_schema_extra=flag("--lora-r"))
    lora_alpha: int = Field(LORA_ALPHA, ge=1, description="LoRA alpha.", json_schema_extra=flag("--lora-alpha"))
    eps_low: float = Field(EPS_LOW, gt=0, description="Lower clip of the ratio (1 - eps_low).",
                           json_schema_extra=flag("--eps-low"))
    eps_high: float = Field(EPS_HIGH, gt=0, description="Upper clip of the ratio (1 + eps_high).",
                            json_schema_extra=flag("--eps-high"))
    correction_cap: float = Field(CORRECTION_CAP, gt=0, description="Cap of the detached rollout-engine "
                                  "correction w = clip(pi_old / q, 0, cap).",
                                  json_schema_extra=flag("--correction-cap"))
    success: float = Field(SUCCESS, gt=0, le=1, description="Reward at which a rollout counts as a success (a "
                           "group with none is rescued).", json_schema_extra=flag("--success"))
    use_vllm: bool = Field(False, description="Generate with vLLM (GPU; then q is vLLM's and the correction "
                           "applies).", json_schema_extra=flag("--use-vllm"))
    vllm_mode: Literal["colocate", "server"] = Field("colocate", description="colocate (server mode is refused).",
                                                     json_schema_extra=flag("--vllm-mode"))
    sandbox: SandboxChoice = "local"
    command_timeout_s: CommandTimeout = DEFAULT_COMMAND_TIMEOUT_S
    seed: int = Field(RECIPE_SEED, description="Seed.", json_schema_extra=flag("--seed"))
    reanchor_every: int | None = Field(None, ge=0, description="Optimiser steps between re-anchorings of the router "
                                       "on the current policy's validation runs (0: never; default: every "
                                       f"{ADAPTIVE_REANCHOR_EVERY} for adaptive, on the validation table's own tasks "
                                       "unless --reanchor-tasks names others; never for the other routers).",
                                       json_schema_extra=flag("--reanchor-every"))
    reanchor_tasks: Annotated[list[str], BeforeValidator(comma_list_kept_empty)] = Field(
        default_factory=list, description="Comma-separated validation task ids the checkpoint runs.",
        json_schema_extra=flag("--reanchor-tasks"))
    reanchor_split: str | None = Field(None, description="Split of the validation task ids.",
                                       json_schema_extra=flag("--reanchor-split"))
    reanchor_max_turns: int | None = Field(None, ge=1, description="Turns per validation run (default: "
                                           "--max-turns, as the training rollouts).",
                                    json_schema_extra=flag("--reanchor-max-turns"))
    reanchor_max_new_tokens: int = Field(512, ge=1, description="Tokens per validation turn.",
                                         json_schema_extra=flag("--reanchor-max-new-tokens"))
    trl: PassedThrough = RESCUE_TRL.setting()
    peft: PassedThrough = RESCUE_PEFT.setting()
    _passed_through = checked(RESCUE_TRL, RESCUE_PEFT)

    @model_validator(mode="before")
    @classmethod
    def _default_router(cls, data: Any) -> Any:
        """No router named: the validation-rule router where a validation table is given, else random."""
        if isinstance(data, dict) and data.get("router") is None:
            data = {**data, "router": default_router(None, data.get("validation"))}
        return data


def world_size() -> int:
    """Processes of this run, as `accelerate launch` / torchrun announce them (1 when launched plainly)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def world_rank() -> int:
    """This process's rank under `accelerate launch` / torchrun (0 when launched plainly)."""
    return int(os.environ.get("RANK", "0"))


def check_options(config: RescueTrainConfig) -> None:
    """Refuse, before anything loads, what the trainer cannot do."""
    rows, world = config.k * config.tasks_per_step, world_size()
    if config.init_adapter is not None:
        if config.peft:
            raise InputError("--peft", None, "a warm start (--init-adapter) trains the adapter as it was saved; "
                             "--peft has nothing to set")
        if not (config.init_adapter / "adapter_config.json").is_file():
            raise InputError("--init-adapter", None, f"{config.init_adapter}: not a LoRA adapter folder (no "
                             "adapter_config.json)")
        warm_start_record(config.init_adapter)
    if rows % (config.steps_per_generation * world):
        across = f" x {world} processes" if world > 1 else ""
        raise InputError("--steps-per-generation", None, f"{config.steps_per_generation}{across} does not divide "
                         f"the {rows} rollouts of a generation batch (K {config.k} x {config.tasks_per_step} tasks)")
    if config.top_k is not None and (config.top_k > config.k or config.k % config.top_k):
        raise InputError("--top-k", None, f"{config.top_k} does not divide K = {config.k}: each of the top-k "
                         "siblings samples K / top-k rollouts")
    if config.use_vllm and config.vllm_mode == "server":
        raise InputError("--vllm-mode", None, "server mode is not supported: a rescue step generates a second "
                         "time within one generation batch, with rows of several harnesses, which a shared vLLM "
                         "server is not tested with; use colocate")
    from unscaffold.preflight import vllm_problem

    missing = vllm_problem(config.use_vllm)  # with --no-preflight too: vLLM's import error is a long traceback
    if missing:
        raise InputError("--use-vllm", None, missing.removeprefix("--use-vllm: "))


def reanchor_every(config: RescueTrainConfig) -> int:
    """Steps between re-anchorings (0: never): the adaptive router re-anchors by default."""
    if config.reanchor_every is not None:
        return config.reanchor_every
    return ADAPTIVE_REANCHOR_EVERY if config.router == "adaptive" else 0


def top_k_of(config: RescueTrainConfig) -> int:
    return config.top_k or default_top_k(config.k)


def pool_notes(config: RescueTrainConfig, siblings: list[str]) -> list[str]:
    """What a reader of the summary must know about how rescue groups were drawn."""
    if config.router == "fixed":
        mixture = fixed_mixture(siblings, config.k)
        return [f"fixed mixture: every group's {config.k} rollouts under {', '.join(mixture)} (no rescue step)"]
    top_k = top_k_of(config)
    if config.router in ("none", "same") or len(siblings) > top_k:
        return []
    return [f"warning: the pool holds {len(siblings)} siblings for top-k {top_k}: every rescue group holds "
            f"every sibling, so the {config.router} router only chooses which sample more than once; give "
            "a larger pool or a smaller --top-k"]


def resolve_model(spec: str) -> Path:
    """The base model's folder: a built-in one (built once), a local checkpoint, or a hub id as `train-sft`
    takes it (from the Hugging Face cache, fetched into it when not there yet)."""
    from unscaffold.offline.tiny import is_built_in, resolve_model_path
    from unscaffold.preflight import looks_like_hub_id

    if is_built_in(spec):  # tiny, tiny-qwen3.5 (the hybrid), or either with :TEMPLATE
        return Path(resolve_model_path(spec))
    path = Path(spec).expanduser()
    if not path.exists() and looks_like_hub_id(spec):
        from huggingface_hub import snapshot_download

        try:
            path = Path(snapshot_download(spec))
        except Exception as e:  # the hub's errors (offline, gated, unknown repo) share no base class
            raise InputError("--model", None, f"{spec}: not a folder here and the Hugging Face hub cannot give it "
                             f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
    if not (path / "config.json").is_file():
        raise InputError("--model", None, f"{spec}: not a model folder (no config.json); give a local checkpoint, "
                         "a Hugging Face id or `tiny`")
    return path


class MetricsRecorder:
    """One line of metrics.jsonl per step, from the settled groups and their trained tokens."""

    def __init__(self, path: Path, router: Router, tasks: dict[str, TaskView], success: float,
                 progress: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.path, self.router, self.tasks, self.success, self.progress = path, router, tasks, success, progress
        self.step = 0
        self.lines: list[dict[str, Any]] = []
        self.t0 = time.monotonic()

    def __call__(self, outcomes: list[GroupOutcome], row_tokens: list[float]) -> None:
        self.step += 1
        stats = step_stats(outcomes, self.success)
        k = len(row_tokens) // max(len(outcomes), 1)
        tokens = sum(row_tokens)
        in_effective = sum(sum(row_tokens[g * k:(g + 1) * k]) for g, o in enumerate(outcomes)
                           if effective(o.rewards, self.success))
        base_pref = [prefers_base(self.router, self.tasks[o.task_id]) for o in outcomes]
        undecided = sum(p is None for p in base_pref)
        line = {"step": self.step, "tasks": [o.task_id for o in outcomes], **stats.model_dump(),
                "effective_groups": sum(effective(o.rewards, self.success) for o in outcomes),
                "method": self.router.name, "router": self.router.name,
                "effective_token_share": in_effective / tokens if tokens else 0.0,
                "base_preferred_rate": sum(p is True for p in base_pref) / len(base_pref) if base_pref else 0.0,
                "base_undecided_rate": undecided / len(base_pref) if base_pref else 0.0,
                "trained_tokens": int(tokens),
                "rescue_harnesses": [h for o in outcomes for h in o.harnesses],
                "router_anchors": getattr(self.router, "anchors", 0),
                "mean_reward": sum(sum(o.rewards) for o in outcomes) / max(sum(len(o.rewards) for o in outcomes), 1),
                "wall_s": round(time.monotonic() - self.t0, 2)}
        append_jsonl(self.path, line)
        self.lines.append(line)
        if self.progress:
            self.progress(line)


def build_router(config: RescueTrainConfig, siblings: list[str]) -> Router:
    from unscaffold.rescue.router_loader import load_router
    from unscaffold.rescue.validation import load_table

    if config.router == "none":
        return ControlRouter("none", [])
    if config.router == "same":
        return ControlRouter("same", [BASE])
    if config.router == "fixed":
        return ControlRouter("fixed", siblings)
    if config.router not in ROUTERS:
        raise InputError("--router", None, f"unknown router {config.router!r}")
    table = load_table(config.validation) if config.validation else None
    return load_router(config.router, siblings, table, seed=config.seed, profilers=config.profilers,
                       voters=config.voters)


def train(config: RescueTrainConfig, progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run rescue GRPO; returns the summary also written to OUT/summary.json. The suite is closed however
    training ends."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from unscaffold.benchmarks import load_suite

    check_options(config)
    with load_suite(config.suite, config.data, config.split_file) as suite:
        return train_on(suite, config, progress)


def train_on(suite: Suite, config: RescueTrainConfig, progress: Callable[[dict[str, Any]], None] | None = None
             ) -> dict[str, Any]:
    """`train` on a suite already open (its caller closes it)."""
    from accelerate.utils import broadcast_object_list

    from unscaffold.knowledge.bank import load_bank
    from unscaffold.knowledge.hstar import HStarHarness, bank_for_harness
    from unscaffold.llm.types import Message
    from unscaffold.minimal_harness.harness import MinimalHarness
    from unscaffold.rescue.environment import EnvironmentContext, environment_class
    from unscaffold.rescue.pool import load_pool, materialise, shipped_pool
    from unscaffold.rescue.prompts import prompt_rows, task_openings

    clock = Clock()
    state = process_state()
    main = state.is_main_process
    tasks = suite.tasks(config.split)
    if config.task_ids:
        unknown = sorted(set(config.task_ids) - {t.id for t in tasks})
        if unknown:
            raise InputError("--tasks", None, f"unknown task id(s) {', '.join(unknown)} in {config.suite}")
        tasks = [t for t in tasks if t.id in set(config.task_ids)]
    if not tasks:
        raise InputError("--split", None, "no tasks selected")
    refuse_test_tasks(((t.id, t.split) for t in tasks), "--split", "rescue training")
    style = suite.check_opening(config.opening)
    pool = load_pool(config.pool or shipped_pool(config.suite))
    if pool.suite != config.suite:
        raise InputError(str(pool.path), "suite", f"the pool is for {pool.suite!r}, not {config.suite!r}")
    config.out.mkdir(parents=True, exist_ok=True)
    pool.hstar = suite.bank_path()
    with state.main_process_first():  # one process writes the pool's banks and builds a built-in model
        pool = materialise(pool, config.out / "pool")
        model_path = resolve_model(config.model)
    # TRL's tool loop ends a rollout at the first reply without a tool call, so no bank's before_finish
    # check can send it back: the harnesses say so, and the re-anchoring runs (which use them) match training
    harnesses: dict[str, Any] = {
        "base": MinimalHarness() if pool.spec.base == "minimal"
        else HStarHarness(load_bank(bank_for_harness(pool.spec.base, suite.bank_path())), finish_checks=False)}
    for name, bank in pool.banks.items():
        harnesses[name] = HStarHarness(load_bank(bank), finish_checks=False)
    router = build_router(config, pool.names)
    if main:
        write_json_atomic(config.out / "config.json", config.model_dump(mode="json"))
    by_id = {t.id: t for t in tasks}
    views = {t.id: TaskView(task_id=t.id, text=t.instruction) for t in tasks}
    factories = {name: environment_class(EnvironmentContext(
        suite=suite, tasks=by_id, harness_name=name, harness=h, sandbox=config.sandbox,
        command_timeout_s=config.command_timeout_s, work_dir=config.out / "rollouts"))
        for name, h in harnesses.items()}

    openings = [task_openings(suite, tasks, style, config.sandbox, config.out / "rollouts") if main else None]
    if state.num_processes > 1:  # built once (the real AppWorld starts each task's world for it), then shared
        broadcast_object_list(openings)
    opening_of: dict[str, list[Message]] = openings[0] or {}

    def prompt(name: str, task_id: str) -> list[dict[str, Any]]:
        return prompt_rows(harnesses[name].system_prompt(), opening_of[task_id])

    def rescue_row(row: dict[str, Any], sibling: str) -> dict[str, Any]:
        return {**row, "environment": sibling, "prompt": prompt(sibling, row["task_id"])}

    metrics_path = config.out / METRICS
    if main:
        metrics_path.unlink(missing_ok=True)  # a new run: metrics describe this run only
    recorder = MetricsRecorder(metrics_path, router, views, config.success, progress)
    trainer = make_trainer(config, model_path, factories, [{"prompt": prompt("base", t.id), "environment": "base",
                                                             "task_id": t.id} for t in tasks],
                           pick=None if config.router in ("none", "fixed")
                           else lambda task_id, k: rescue_harnesses(router, views[task_id], k, top_k_of(config)),
                           spread=fixed_mixture(pool.names, config.k) if config.router == "fixed" else None,
                           rescue_row=rescue_row,
                           record=recorder, tool_schemas={name: h.tools() for name, h in harnesses.items()})
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # metrics.jsonl and the caller's progress report instead
    trainer.add_callback(trl_log_callback(config.out / TRL_LOG, main))
    runner = None
    if reanchor_every(config):
        callback, runner = reanchor_callback(config, suite, harnesses, router, model_path)
        trainer.add_callback(callback)
    start = lora_b(trainer.model)  # a warm start's B matrices are not zero: whether they moved is what counts
    t0 = time.monotonic()
    trainer.train()
    trainer.save_model(str(config.out / "adapter"))
    if not main:  # the main process writes the records; the others return what it wrote
        state.wait_for_everyone()
        return json.loads((config.out / "summary.json").read_text())
    summary = summarise(recorder.lines, wall_s=time.monotonic() - t0, optimiser_steps=trainer.state.global_step)
    record = rescue_record(config, model_path, [t.id for t in tasks], recorder.lines, summary, clock,
                           fillers=trainer.rescue.fillers, reanchor_trials=runner.trials if runner else 0,
                           router=router, moved=lora_moved(trainer.model, start))
    summary.update(trained=record.trained, not_trained_reason=record.not_trained_reason,
                   record=record.model_dump(mode="json"))
    from unscaffold.rescue.router_state import ROUTER_STATE, save_router

    save_router(router, config.out / ROUTER_STATE, list(views.values()), seed=config.seed,
                voters=config.voters or config.profilers)
    summary["notes"] = pool_notes(config, pool.names)
    summary.update(method=config.router, router=router.name, top_k=top_k_of(config), suite=config.suite,
                   pool=str(pool.path),
                   model=str(model_path), world_size=state.num_processes)
    write_json_atomic(config.out / "summary.json", summary)
    from unscaffold.rescue.plot import write_training_plot

    write_training_plot(recorder.lines, config.out / "metrics.html", summary,
                        {**config.model_dump(mode="json"), "model": str(model_path), "pool": str(pool.path),
                         "top_k": top_k_of(config)}, config.out / TRL_LOG)
    state.wait_for_everyone()
    return summary


def process_state() -> Any:
    """accelerate's view of the processes, set up as the trainer will set it (CPU when there is no GPU)."""
    import torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available())


def trl_log_callback(path: Path, main: bool = True) -> Any:
    """TRL's logs, one line per optimiser step (loss, clip_ratio/*, entropy, ...), for what metrics.jsonl
    (one line per generation batch) does not say."""
    from transformers import TrainerCallback

    if main:
        path.unlink(missing_ok=True)

    class TrlLog(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
                   **kwargs: Any) -> None:
            if logs and "loss" in logs and state.is_world_process_zero:
                append_jsonl(path, {"step": state.global_step, **logs})

    return TrlLog()


def reanchor_callback(config: RescueTrainConfig, suite: Any, harnesses: dict[str, Any], router: Router,
                      model_path: Path) -> tuple[Any, Any]:
    """Every `reanchor_every` steps: save the adapter, run the validation tasks with it, re-anchor the router.
    Returns the callback and the runner (which counts its validation rollouts)."""
    from transformers import TrainerCallback

    from unscaffold.rescue.reanchor import Reanchor

    if not hasattr(router, "reanchor"):
        raise InputError("--reanchor-every", None, f"the {router.name} router does not learn from validation runs")
    task_ids = config.reanchor_tasks or [t.task_id for t in getattr(getattr(router, "table", None), "tasks", [])]
    if not task_ids:
        raise InputError("--reanchor-tasks", None, "re-anchoring needs validation task ids")
    splits = [config.reanchor_split] if config.reanchor_split or config.reanchor_tasks else suite.splits()
    known = {t.id: t for split in splits for t in suite.tasks(split)}
    unknown = [t for t in task_ids if t not in known]
    if unknown:
        raise InputError("--reanchor-tasks", None, f"unknown task id(s) {', '.join(unknown)}")
    runner = Reanchor(suite=suite, tasks=[known[t] for t in task_ids], harnesses=harnesses,
                      model_path=model_path, out=config.out / "reanchor", sandbox=config.sandbox,
                      max_turns=config.reanchor_max_turns or config.max_turns, temperature=config.temperature,
                      max_new_tokens=config.reanchor_max_new_tokens,
                      command_timeout_s=config.command_timeout_s)
    runner.check()
    every = reanchor_every(config)

    class ReanchorCallback(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step % every or not state.is_world_process_zero:
                return  # the main process alone routes, so it alone re-anchors
            checkpoint = config.out / "checkpoints" / f"step-{state.global_step}"
            kwargs["model"].save_pretrained(str(checkpoint))
            router.reanchor(runner.run(state.global_step, checkpoint))  # type: ignore[attr-defined]

    return ReanchorCallback(), runner


def grpo_arguments(config: RescueTrainConfig) -> dict[str, Any]:
    """The recipe's GRPOConfig arguments (every key named in RESCUE_TRL.set_by or its defaults)."""
    import torch

    objective = ObjectiveConfig(eps_low=config.eps_low, eps_high=config.eps_high,
                                correction_cap=config.correction_cap,
                                steps_per_generation=config.steps_per_generation,
                                num_iterations=config.num_iterations)
    rows_per_generation = config.k * config.tasks_per_step
    return dict(
        output_dir=str(config.out / "trainer"), per_device_train_batch_size=rows_per_generation
        // (config.steps_per_generation * world_size()), num_generations=config.k, gradient_accumulation_steps=1,
        max_steps=config.max_steps, learning_rate=config.learning_rate,
        **grpo_objective_args(objective, config.use_vllm),
        max_completion_length=config.max_completion_length, max_tool_calling_iterations=config.max_turns - 1,
        temperature=config.temperature, use_vllm=config.use_vllm, vllm_mode=config.vllm_mode,
        logging_steps=1, save_strategy="no", report_to=[], seed=config.seed, bf16=torch.cuda.is_available(),
        use_cpu=not torch.cuda.is_available(), disable_tqdm=True,
    )


def grpo_config(config: RescueTrainConfig) -> Any:
    """TRL's GRPOConfig: the recipe's arguments, then the `--trl` fields."""
    from trl import GRPOConfig

    return GRPOConfig(**RESCUE_TRL.apply(grpo_arguments(config), config.trl))


def lora_config(config: RescueTrainConfig) -> Any:
    """PEFT's LoraConfig of a fresh adapter: the recipe's rank and alpha on all linear layers, then `--peft`."""
    from peft import LoraConfig

    recipe = dict(r=config.lora_r, lora_alpha=config.lora_alpha, target_modules="all-linear", task_type="CAUSAL_LM")
    return LoraConfig(**RESCUE_PEFT.apply(recipe, config.peft))


def make_trainer(config: RescueTrainConfig, model_path: Path, factories: dict[str, Any], rows: list[dict[str, Any]],
                 tool_schemas: dict[str, list[dict[str, Any]]] | None = None, **hook: Any) -> Any:
    from datasets import Dataset
    from peft import LoraConfig, PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

    from unscaffold.rescue.trl_rescue import RescueGRPOTrainer, RescueHook

    args = grpo_config(config)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model: PreTrainedModel | PeftModel = AutoModelForCausalLM.from_pretrained(model_path)
    from unscaffold.llm.hf_backend import quiet_after_first_load

    quiet_after_first_load()  # the re-anchoring runs load the checkpoint again: no second round of bars
    lora: LoraConfig | None = lora_config(config)
    if config.init_adapter is not None:  # a warm start: the adapter trains on from where it was
        model, lora = PeftModel.from_pretrained(model, str(config.init_adapter), is_trainable=True), None
    return RescueGRPOTrainer(
        model=model, args=args, processing_class=tokenizer, train_dataset=Dataset.from_list(rows),
        environment_factory=factories, peft_config=lora,
        rescue=RescueHook(success=config.success, **hook), tool_schemas=tool_schemas)


def summarise(lines: list[dict[str, Any]], wall_s: float, optimiser_steps: int) -> dict[str, Any]:
    """`steps` counts optimiser steps; each line of metrics.jsonl is one generation batch."""
    groups = sum(line["groups"] for line in lines)
    rescued = sum(line["rescued_groups"] for line in lines)
    rollouts = sum(line["rollouts"] for line in lines)
    grpo = sum(line["grpo_rollouts"] for line in lines)
    return {
        "steps": optimiser_steps,
        "generation_batches": len(lines),
        "effective_groups": sum(line.get("effective_groups", 0) for line in lines),
        "effective_group_rate": sum(line["effective_group_rate"] * line["groups"] for line in lines) / groups
        if groups else 0.0,
        "base_effective_group_rate": sum(line["base_effective_group_rate"] * line["groups"] for line in lines)
        / groups if groups else 0.0,
        "rescued_groups": rescued,
        "rescue_success_rate": sum(line["rescue_success_rate"] * line["rescued_groups"] for line in lines) / rescued
        if rescued else 0.0,
        "rollouts": rollouts,
        "extra_rollout_pct": 100.0 * (rollouts - grpo) / grpo if grpo else 0.0,
        "wall_s": wall_s,
    }


def rescue_record(config: RescueTrainConfig, model_path: Path, task_ids: list[str], lines: list[dict[str, Any]],
                  summary: dict[str, Any], clock: Clock, *, fillers: int, reanchor_trials: int, router: Router,
                  moved: bool) -> TrainingRecord:
    """The run's record: every rollout it sampled, the router's LLM calls, and whether it trained at all."""
    table = getattr(router, "table", None)
    validation = sum(len(v) for t in table.tasks for v in t.rewards.values()) if table is not None else 0
    meter = getattr(router, "meter", None)
    wall, cpu, gpu = clock.seconds()
    grpo = sum(line["grpo_rollouts"] for line in lines)
    cost = TrainingCost(
        rollouts=Rollouts(base=grpo, rescue=summary["rollouts"] - grpo, filler=fillers, reanchor=reanchor_trials,
                          validation=validation),
        router_calls=meter.calls if meter else 0,
        router_tokens={"input": meter.input_tokens, "output": meter.output_tokens} if meter else {},
        optimiser_steps=summary["steps"], generation_batches=summary["generation_batches"],
        cpu_s=cpu, gpu_s=gpu, wall_s=wall)
    warm = warm_start_record(config.init_adapter) if config.init_adapter else None
    if warm is not None:
        cost = add_costs(warm.cost, cost)
    reason = None
    if not summary["effective_groups"]:
        reason = ("no effective group: every group's rewards were equal, so every advantage and every gradient "
                  "was zero")
    elif not moved:
        reason = "every update was zero: the adapter's LoRA B weights are where they started"
    return TrainingRecord(
        recipe="rescue", method=config.router, base_model=config.model, base_model_path=str(model_path),
        suite=config.suite, train_tasks=sorted(task_ids), seed=config.seed, trained=reason is None,
        not_trained_reason=reason, cost=cost, warm_start=str(config.init_adapter) if warm else None,
        passed_through={flag: values for flag, values in (("--trl", config.trl), ("--peft", config.peft)) if values},
        evaluation={"suite": config.suite, "split": config.split, "opening": config.opening,
                    "max_turns": config.max_turns, "command_timeout_s": config.command_timeout_s,
                    "max_completion_length": config.max_completion_length, "temperature": config.temperature,
                    "success": config.success, "k": config.k, "top_k": top_k_of(config),
                    "reanchor_every": reanchor_every(config)})
