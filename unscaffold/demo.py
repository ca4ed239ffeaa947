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
Re-running resumes: finished runs are kept."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, Field
from rich.console import Console
from rich.table import Table

from unscaffold.collect.models import DEFAULT_REPLACE_BUDGET
from unscaffold.errors import UnscaffoldError
from unscaffold.flags import comma_list_kept_empty, flag

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
    student: str = Field(f"replay:{REPLAYS / 'demo_student_h.json'}", description="Base student under h (default: "
                         "the shipped replay).", json_schema_extra=flag("--student", show_default=False))
    hstar_student: str = Field(f"replay:{REPLAYS / 'demo_student_hstar.json'}", description="Base student under h* "
                               "(default: the shipped replay; a replay needs its own file).",
                               json_schema_extra=flag("--hstar-student", show_default=False))
    reviewer: str = Field(f"replay:{REPLAYS / 'demo_reviewer.json'}", description="Reviewer of the collection "
                          "(default: the shipped recorded reviewer).",
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


class StepFailed(UnscaffoldError):
    """A step's command failed: the demo stops with its status (1: a run made no progress, else 2)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.exit_code = 1 if status == 1 else 2


class Step(BaseModel):
    name: str
    argv: list[str]
    seconds: float = 0.0
    ok: bool = False


class Demo:
    def __init__(self, config: DemoConfig, console: Console | None = None) -> None:
        self.config = config
        self.console = console or Console()
        self.steps: list[Step] = []

    def cli(self, name: str, *args: str, stdout_to: Path | None = None) -> Step:
        """Run one `unscaffold` command as a user would; stop the demo (exit 2) if it fails. `stdout_to`
        keeps what it prints (its `--json`) in a file, as `> FILE` would."""
        argv = ["unscaffold", *args]
        self.console.rule(f"[bold]{len(self.steps) + 1}. {name}")
        shown = " ".join(shlex.quote(a) for a in argv) + (f" > {shlex.quote(str(stdout_to))}" if stdout_to else "")
        self.console.print(shown, style="cyan", highlight=False)
        t0 = time.monotonic()
        command = [sys.executable, "-m", "unscaffold.cli", *args]
        if stdout_to is None:
            done = subprocess.run(command)
        else:
            with open(stdout_to, "w", encoding="utf-8") as sink:
                done = subprocess.run(command, stdout=sink)
        step = Step(name=name, argv=argv, seconds=round(time.monotonic() - t0, 1), ok=done.returncode == 0)
        self.steps.append(step)
        if not step.ok:
            raise StepFailed(f"demo: {name}: `{' '.join(argv)}` failed with exit code {done.returncode}",
                             done.returncode)
        return step

    def run(self) -> Path:
        c, out = self.config, self.config.out
        train, test = demo_tasks(c)
        out.mkdir(parents=True, exist_ok=True)
        k = out / "K"
        bank = Path(__file__).resolve().parent / "benchmarks" / SUITE / "hstar"
        self.cli("compile the h* bank into the reviewer's reference K", "compile-k", str(bank), "--out", str(k),
                 "--suite", SUITE)
        common = ["--concurrency", str(c.concurrency)]
        self.cli("evaluate the base student under the minimal harness h", "run", SUITE, "--student", c.student,
                 *_select(test, "test"), *common, "--out", str(out / "base_h"))
        self.cli("evaluate the base student under the optimized harness h*", "run", SUITE, "--harness", "hstar",
                 "--student", c.hstar_student, *_select(test, "test"), *common, "--out", str(out / "base_hstar"))
        self.cli("collect: the reviewer reads every proposal before it runs (PASS or REPLACE)", "run", SUITE,
                 "--student", c.student, "--reviewer", c.reviewer, "--knowledge", str(k), "--budget", str(c.budget),
                 *_select(train, "train"), *common, "--out", str(out / "collect"))
        self.cli("build the SFT data set (filter, audit, leak scrub, reasoning masks)", "build-sft",
                 str(out / "collect"), "--out", str(out / "sft.jsonl"))
        steps = ["--max-steps", str(c.sft_steps)] if c.sft_steps else []
        tiny = c.model == TINY
        self.cli("LoRA SFT of the student on the accepted steps", "train-sft", str(out / "sft.jsonl"), "--model",
                 c.model, *steps, *(TINY_SFT_ARGS if tiny else []), "--out", str(out / "adapter"))
        limit, turns = TINY_EVAL if tiny else ("", [])
        tuned = f"hf:{c.model}+{out / 'adapter'}{limit}"  # a built-in name is the same model here as in train-sft
        self.cli("evaluate the tuned student under h alone (no reviewer, no K, no h*)", "run", SUITE, "--student",
                 tuned, *_select(test, "test"), *turns, "--out", str(out / "tuned"))
        taught = ["--taught", str(out / "sft.jsonl")]
        self.cli("behaviour recovery: which h* behaviours moved into the weights (and which no row taught)",
                 "behaviors", "--base-h", str(out / "base_h"), "--base-hstar", str(out / "base_hstar"), "--tuned",
                 str(out / "tuned"), "--min-eligible", "1", *taught, "--out", str(out / "behaviors.html"))
        self.cli("rescue RL on paper: the simulator compares plain GRPO with sibling rescue", "rescue", "simulate",
                 "--json", stdout_to=out / "rescue_simulate.json")
        self.cli("evaluate the base model itself under h: the baseline both trained models are compared with",
                 "run", SUITE, "--student", f"hf:{c.model}{limit}", *_select(test, "test"), *turns, "--out",
                 str(out / "base_model_h"))
        runs = [out / "base_model_h", out / "base_h", out / "base_hstar", out / "tuned"]
        if c.rescue_steps:
            warm = warm_start_steps(c)
            self.console.print(BUDGET_RULE.format(sft=c.sft_steps or "2 epochs of", warm=warm or "1 epoch of",
                                                  rescue=c.rescue_steps), highlight=False)
            self.cli("warm start for rescue RL: a shorter SFT on the same rows, so the policy earns some reward",
                     "train-sft", str(out / "sft.jsonl"), "--model", c.model,
                     *(["--max-steps", str(warm)] if warm else ["--epochs", "1"]), *(TINY_SFT_ARGS if tiny else []),
                     "--out", str(out / "adapter_warm"))
            self.cli("rescue RL for real: GRPO of the warm-started model on the same train tasks, all-fail groups "
                     "re-sampled under the suite's sibling harnesses", "rescue", "train", SUITE, "--model", c.model,
                     "--init-adapter", str(out / "adapter_warm"), *(["--tasks", ",".join(train)] if train else []),
                     "--max-steps", str(c.rescue_steps), *(TINY_RESCUE_ARGS if tiny else []),
                     "--out", str(out / "rescue"))
            rescued = f"hf:{c.model}+{out / 'rescue' / 'adapter'}{limit}"
            self.cli("evaluate the rescue-trained student under h alone, on the same test tasks", "run", SUITE,
                     "--student", rescued, *_select(test, "test"), *turns, "--out", str(out / "rescue_h"))
            self.cli("rank-1 routing: each test task under the harness the trained router ranks first", "run", SUITE,
                     "--student", rescued, "--harness", "route:shipped", "--router",
                     str(out / "rescue" / "router.json"), *_select(test, "test"), *turns, "--out",
                     str(out / "routed"))
            runs += [out / "rescue_h", out / "routed"]
        self.cli("compare the runs side by side", "compare", *map(str, runs), "--min-eligible", "1", *taught,
                 "--json", "--out", str(out / "compare.html"), stdout_to=out / "compare.json")
        self.cli("the collection's HTML report (review timelines)", "report", str(out / "collect"))
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
            table.add_row(f"{i}. {s.name}", f"{s.seconds:.1f}", "yes" if s.ok else "no")
        self.console.print(table)


def warm_start_steps(config: DemoConfig) -> int:
    """SFT steps of the rescue row's warm start (0: one epoch, where the SFT runs the recipe's two): the
    stated budget rule gives both rows the same optimiser steps."""
    return max(config.sft_steps - config.rescue_steps, 1) if config.sft_steps else 0


def _select(ids: list[str], split: str) -> list[str]:
    """`--tasks` for a list of task ids, `--split` for an empty one."""
    return ["--tasks", ",".join(ids)] if ids else ["--split", split]
