"""`unscaffold demo`: both recipes, offline, on the built-in retrosynthesis suite from one base model.

Harness-Zero (reviewed collection, LoRA SFT) and Harness-S (rescue GRPO with the suite's sibling pool)
train the same base model on the same train tasks; both adapters are evaluated under h on the same test
tasks, beside the base model under h and h* and rank-1 routing, and `compare` labels each from its records.

Each step is the command a user would type (printed before it runs), so the demo doubles as a
walk-through. With no flags it uses the shipped recorded students (examples/replay/demo_*.json: the
minimal-harness student writes its answer raw and finishes unchecked, the h* student uses the bank's
tools), the shipped recorded reviewer (examples/replay/demo_reviewer.json: short RDKit checks of
answer.txt, checked like an LLM's submissions) and the built-in tiny model, trained with settings that
suit its size (TINY_SFT); every flag takes a real model spec, so the same command produces real figures.
Re-running resumes: a finished step whose command and inputs are unchanged is skipped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, Field
from rich.console import Console
from rich.table import Table

from unscaffold.console import out_console
from unscaffold.flags import comma_list_kept_empty, flag
from unscaffold.reproduce.execute import StageFailed, StageRun, execute
from unscaffold.reproduce.plan import DIR, Plan, Stage
from unscaffold.run.folder import RunFolder
from unscaffold.run.models import DEFAULT_REPLACE_BUDGET
from unscaffold.specs import ModelSpec, ReviewerSpec, read_as

ROOT = Path(__file__).resolve().parent.parent
REPLAYS = ROOT / "examples" / "replay"
SUITE = "retrosynthesis"
PLUMBING = (
    "The tiny model has 2 layers of width 64: it can only learn the shape of its training rows (the commands they "
    "repeat, not chemistry), so its scores and behaviour rates are the effect in miniature, not a result."
)
TINY = "tiny-wide"  # the built-in tiny Qwen3 initialised with std 0.2, so an adapter can move its output
# LoRA SFT settings for the tiny model, beside the published recipe's (RECIPES.md SFT item 6). A random 2-layer
# model must learn its rows from scratch in a few minutes on two cores. The rows differ only in their SMILES, so
# a batch of eight teaches little more than one: one row a step gives eight times the updates for the same
# compute, at a 100x learning rate without warm-up, and no activation recomputation.
TINY_SFT: dict[str, tuple[str, str]] = {
    "learning rate": ("2e-4", "2e-2"),
    "warm-up": ("5% of steps", "none"),
    "batch": ("8 (1 per device, 8 by accumulation)", "1"),
    "length": ("2 epochs", "400 steps (50 passes over the 8 rows)"),
    "gradient checkpointing": ("on", "off"),
    "generation": ("up to 2,048 new tokens a turn", "up to 320 new tokens a turn, 8 turns"),
}
TINY_SFT_ARGS = ["--learning-rate", "2e-2", "--warmup-ratio", "0", "--batch-size", "1", "--per-device-batch-size",
                 "1", "--no-gradient-checkpointing"]
TINY_EVAL = ("?max_new_tokens=320", ["--max-turns", "8"])
RESCUE_STEPS = 20
# Rescue GRPO of the tiny model: the recipe's K = 8 would make each generation batch twice as slow here; the
# tiny model's rollouts follow its evaluation's limits (8 turns) within one token budget per episode. Sampled at
# T = 1 the warm-started tiny model rarely makes a parseable tool call (1 in 8 replies, measured) and earns no
# reward; at T = 0.3 it calls its tools and some groups mix a success and a failure, so rescue GRPO has a signal.
TINY_RESCUE_ARGS = ["--k", "4", "--tasks-per-step", "1", "--steps-per-generation", "2", "--max-turns", "8",
                    "--max-completion-length", "1024", "--learning-rate", "1e-3", "--temperature", "0.3"]
BUDGET_RULE = ("both rows take the same optimiser steps on the same rows and tasks: the distilled row {sft} SFT "
               "steps; the rescue row a warm-start SFT of {warm} steps, then {rescue} rescue GRPO steps")
REAL = """To produce real figures, run the same pipeline with real models, for example:
  unscaffold demo --student openai:Qwen/Qwen3-8B@http://localhost:8000/v1 \\
      --hstar-student openai:Qwen/Qwen3-8B@http://localhost:8000/v1 \\
      --reviewer anthropic:claude-sonnet-4-5 --model Qwen/Qwen3-8B --sft-steps 0 \\
      --train-tasks '' --test-tasks '' --out runs/real
(empty task lists take the whole train and test splits; --sft-steps 0 trains the full 2 epochs)."""


DemoTasks = Annotated[list[str] | None, BeforeValidator(comma_list_kept_empty)]


class DemoConfig(BaseModel):
    """Every knob of the demo; the defaults run offline in minutes on two cores. Fields with a `flag` are the
    options of `unscaffold demo`."""

    out: Path = Field(Path("runs/demo"), description="Folder for every run, data set, adapter and report.",
                      json_schema_extra=flag("--out"))
    student: Annotated[ModelSpec, read_as(ModelSpec, "--student", oracle=True)] = Field(
        ModelSpec(kind="replay", target=str(REPLAYS / "demo_student_h.json")), description="Base student under h "
        "(default: the shipped replay).", json_schema_extra=flag("--student", show_default=False))
    hstar_student: Annotated[ModelSpec, read_as(ModelSpec, "--hstar-student", oracle=True)] = Field(
        ModelSpec(kind="replay", target=str(REPLAYS / "demo_student_hstar.json")), description="Base student under "
        "h* (default: the shipped replay; a replay needs its own file).",
        json_schema_extra=flag("--hstar-student", show_default=False))
    reviewer: Annotated[ReviewerSpec, read_as(ReviewerSpec, "--reviewer")] = Field(
        ReviewerSpec(kind="model", model=ModelSpec(kind="replay", target=str(REPLAYS / "demo_reviewer.json"))),
        description="Reviewer of the collection (default: the shipped recorded reviewer).",
        json_schema_extra=flag("--reviewer", show_default=False))
    model: str = Field(TINY, description=f"Base model to fine-tune: `{TINY}` (the built-in tiny model initialised "
                       "for learning) or a path / hub id.", json_schema_extra=flag("--model"))
    train_tasks: DemoTasks = Field(None, description="Collection task ids, comma-separated ('' = the train split; "
                                   "default: the demo's).", json_schema_extra=flag("--train-tasks"))
    test_tasks: DemoTasks = Field(None, description="Evaluation task ids ('' = the test split; default: the "
                                  "demo's).", json_schema_extra=flag("--test-tasks"))
    sft_steps: int = Field(400, ge=0, description="LoRA SFT steps (0: the recipe's 2 epochs).",
                           json_schema_extra=flag("--sft-steps"))
    rescue_steps: int = Field(RESCUE_STEPS, ge=0, description="Rescue GRPO optimiser steps of the same base model "
                              "on the same train tasks, with the suite's shipped pool, after a warm-start SFT of "
                              "--sft-steps minus these on the same rows, so both rows take the same optimiser "
                              "steps (0: skip the rescue recipe).", json_schema_extra=flag("--rescue-steps"))
    budget: int = Field(DEFAULT_REPLACE_BUDGET, ge=0, description="REPLACE decisions per trial")
    concurrency: int = Field(2, ge=1)

    def shipped(self) -> bool:
        """Whether the demo runs on the shipped recorded students and the built-in tiny model."""
        fields = type(self).model_fields
        return (self.student, self.hstar_student, self.model) == (
            fields["student"].default, fields["hstar_student"].default, TINY)


def demo_tasks(config: DemoConfig) -> tuple[list[str], list[str]]:
    shipped = json.loads((REPLAYS / "demo_tasks.json").read_text())
    train = shipped["train"] if config.train_tasks is None else config.train_tasks
    test = shipped["test"] if config.test_tasks is None else config.test_tasks
    return train, test


def _stage(name: str, about: str, *args: str, out: str, after: tuple[str, ...] = (), resumes: bool = False,
           stdout: bool = False, reads: tuple[str, ...] = ()) -> Stage:
    """One demo step: the command a user would type, with `out` relative to the demo folder."""
    return Stage(name=name, about=about, argv=list(args), out=out, after=list(after), resumes=resumes,
                 stdout=stdout, reads=list(reads))


class Demo:
    """The demo is a plan run by `reproduce`'s executor: rerunning it skips every finished step whose command and
    inputs are unchanged, resumes an interrupted run where it left off, and restarts a step that cannot resume."""

    def __init__(self, config: DemoConfig, console: Console | None = None) -> None:
        self.config = config
        self.console = console or out_console()
        self.steps: list[StageRun] = []

    def plan(self) -> Plan:
        c = self.config
        train, test = demo_tasks(c)
        d = DIR
        bank = Path(__file__).resolve().parent / "benchmarks" / SUITE / "hstar"
        common = ["--concurrency", str(c.concurrency)]
        tiny = c.model == TINY
        limit, turns = TINY_EVAL if tiny else ("", [])
        steps = ["--max-steps", str(c.sft_steps)] if c.sft_steps else []
        tuned = f"hf:{c.model}+{d}/adapter{limit}"  # a built-in name is the same model here as in train-sft
        taught = ["--taught", f"{d}/sft.jsonl"]
        stages = [
            _stage("compile-k", "compile the h* bank into the reviewer's reference K", "compile-k", str(bank),
                   "--out", f"{d}/K", "--suite", SUITE, out="K", reads=(str(bank),)),
            _stage("base-h", "evaluate the base student under the minimal harness h", "run", SUITE, "--student",
                   str(c.student), *_select(test, "test"), *common, "--out", f"{d}/base_h", out="base_h",
                   resumes=True),
            _stage("base-hstar", "evaluate the base student under the optimized harness h*", "run", SUITE,
                   "--harness", "hstar", "--student", str(c.hstar_student), *_select(test, "test"), *common, "--out",
                   f"{d}/base_hstar", out="base_hstar", resumes=True),
            _stage("collect", "collect: the reviewer reads every proposal before it runs (PASS or REPLACE)", "run",
                   SUITE, "--student", str(c.student), "--reviewer", str(c.reviewer), "--knowledge", f"{d}/K",
                   "--budget", str(c.budget), *_select(train, "train"), *common, "--out", f"{d}/collect", out="collect",
                   after=("compile-k",), resumes=True),
            _stage("build-sft", "build the SFT data set (filter, audit, leak scrub, reasoning masks)", "build-sft",
                   f"{d}/collect", "--out", f"{d}/sft.jsonl", out="sft.jsonl", after=("collect",)),
            _stage("train-sft", "LoRA SFT of the student on the accepted steps", "train-sft", f"{d}/sft.jsonl",
                   "--model", c.model, *steps, *(TINY_SFT_ARGS if tiny else []), "--out", f"{d}/adapter",
                   out="adapter", after=("build-sft",)),
            _stage("tuned", "evaluate the tuned student under h alone (no reviewer, no K, no h*)", "run", SUITE,
                   "--student", tuned, *_select(test, "test"), *turns, "--out", f"{d}/tuned", out="tuned",
                   after=("train-sft",), resumes=True),
            _stage("behaviors", "behaviour recovery: which h* behaviours moved into the weights (and which no row "
                   "taught)", "behaviors", "--base-h", f"{d}/base_h", "--base-hstar", f"{d}/base_hstar", "--tuned",
                   f"{d}/tuned", "--min-eligible", "1", *taught, "--out", f"{d}/behaviors.html",
                   out="behaviors.html", after=("base-h", "base-hstar", "tuned", "build-sft")),
            _stage("simulate", "rescue RL on paper: the simulator compares plain GRPO with sibling rescue", "rescue",
                   "simulate", "--json", out="rescue_simulate.json", stdout=True),
        ]
        stages.append(_stage(
            "base-model-h", "evaluate the base model itself under h: the baseline both trained models are compared "
            "with", "run", SUITE, "--student", f"hf:{c.model}{limit}", *_select(test, "test"), *turns, "--out",
            f"{d}/base_model_h", out="base_model_h", resumes=True))
        runs = ["base-model-h", "base-h", "base-hstar", "tuned"]
        if c.rescue_steps:
            warm = warm_start_steps(c)
            rescued = f"hf:{c.model}+{d}/rescue/adapter{limit}"
            stages += [
                _stage("warm-start", "warm start for rescue RL: a shorter SFT on the same rows, so the policy earns "
                       "some reward", "train-sft", f"{d}/sft.jsonl", "--model", c.model,
                       *(["--max-steps", str(warm)] if warm else ["--epochs", "1"]), *(TINY_SFT_ARGS if tiny else []),
                       "--out", f"{d}/adapter_warm", out="adapter_warm", after=("build-sft",)),
                _stage("rescue", "rescue RL for real: GRPO of the warm-started model on the same train tasks, "
                       "all-fail groups re-sampled under the suite's sibling harnesses", "rescue", "train", SUITE,
                       "--model", c.model, "--init-adapter", f"{d}/adapter_warm",
                       *(["--tasks", ",".join(train)] if train else []), "--max-steps", str(c.rescue_steps),
                       *(TINY_RESCUE_ARGS if tiny else []), "--out", f"{d}/rescue", out="rescue",
                       after=("warm-start",)),
                _stage("rescue-h", "evaluate the rescue-trained student under h alone, on the same test tasks", "run",
                       SUITE, "--student", rescued, *_select(test, "test"), *turns, "--out", f"{d}/rescue_h",
                       out="rescue_h", after=("rescue",), resumes=True),
                _stage("routed", "rank-1 routing: each test task under the harness the trained router ranks first",
                       "run", SUITE, "--student", rescued, "--harness", "route:shipped", "--router",
                       f"{d}/rescue/router.json", *_select(test, "test"), *turns, "--out", f"{d}/routed",
                       out="routed", after=("rescue",), resumes=True),
            ]
            runs += ["rescue-h", "routed"]
        folders = {s.name: s.out for s in stages}
        stages += [
            _stage("compare", "compare the runs side by side", "compare", *(f"{d}/{folders[r]}" for r in runs),
                   "--min-eligible", "1", *taught, "--json", "--out", f"{d}/compare.html", out="compare.json",
                   stdout=True, after=(*runs, "build-sft")),
            _stage("report", "the collection's HTML report (review timelines)", "report", f"{d}/collect",
                   out=f"collect/{RunFolder.REPORT}", after=("collect",)),
        ]
        return Plan(recipe="demo", suite=SUITE, scale="mini", model=c.model, train=train, test=test, stages=stages)

    def run(self) -> Path:
        """Run every step not finished earlier with the same command and inputs; a failed step stops the demo
        (exit 1 when a run made no progress, else 2) and rerunning continues from it."""
        c, out = self.config, self.config.out
        if c.rescue_steps:
            warm = warm_start_steps(c)
            self.console.print(BUDGET_RULE.format(sft=c.sft_steps or "2 epochs of", warm=warm or "1 epoch of",
                                                  rescue=c.rescue_steps), highlight=False)
        try:
            self.steps = execute(self.plan(), out, console=self.console)
        except StageFailed as e:
            self.steps = e.runs
            raise
        return out

    def settings(self) -> None:
        """The tiny model's training and generation settings beside the published recipe's."""
        table = Table(title=f"SFT settings of the tiny model ({TINY}) beside the published recipe")
        for name in ("setting", "published", "this demo"):
            table.add_column(name)
        for name, (published, ours) in TINY_SFT.items():
            table.add_row(name, published, ours)
        self.console.print(table)

    def summary(self) -> None:
        table = Table(title="unscaffold demo")
        for name in ("step", "seconds", "ok"):
            table.add_column(name)
        for i, s in enumerate(self.steps, 1):
            done = {"ran": "yes", "skipped": "finished earlier", "failed": "no", "pending": "not run"}[s.status]
            table.add_row(f"{i}. {s.about}", f"{s.seconds:.1f}", done)
        self.console.print(table)


def warm_start_steps(config: DemoConfig) -> int:
    """SFT steps of the rescue row's warm start (0: one epoch, where the SFT runs the recipe's two): the
    stated budget rule gives both rows the same optimiser steps."""
    return max(config.sft_steps - config.rescue_steps, 1) if config.sft_steps else 0


def _select(ids: list[str], split: str) -> list[str]:
    """`--tasks` for a list of task ids, `--split` for an empty one."""
    return ["--tasks", ",".join(ids)] if ids else ["--split", split]
