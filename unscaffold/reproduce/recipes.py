"""The two recipes as plans: which commands, in which order, over which tasks, at which scale.

`mini` runs the whole plan offline on two cores: the retrosynthesis suite with the demo's recorded students
and reviewer and the built-in tiny model (the demo's settings); `paper` writes the published budgets and
settings (RECIPES.md) for real model specs, with the whole train and test splits."""

from __future__ import annotations

from pydantic import BaseModel, Field

from unscaffold.errors import UnscaffoldError
from unscaffold.reproduce.plan import DIR, Cost, Plan, Scale, Stage

PAPER_BUDGETS = (5, 3, 1)  # REPLACE decisions per trial in the published runs (both domains)
MINI_BUDGETS = (5,)
PAPER_ROUTERS = ("same", "random", "rule", "adaptive")
MINI_ROUTERS = ("same", "random")


class Models(BaseModel):
    """The model specs of a plan; None takes the scale's default."""

    model: str | None = Field(None, description="base model trained by both recipes (a path, hub id or built-in)")
    student: str | None = Field(None, description="base student under h (default: the base model itself)")
    hstar_student: str | None = Field(None, description="base student under h* (default: --student)")
    reviewer: str | None = Field(None, description="reviewer of the collection")


class Resolved(BaseModel):
    model: str
    student: str
    hstar_student: str
    reviewer: str | None
    tiny: bool
    train: list[str]
    test: list[str]


def _suite_tasks(suite: str) -> tuple[list[str], list[str]]:
    from unscaffold.benchmarks import load_suite

    with load_suite(suite) as loaded:
        return [t.id for t in loaded.tasks("train")], [t.id for t in loaded.tasks("test")]


def resolve(suite: str, scale: Scale, models: Models) -> Resolved:
    """The scale's defaults under the user's specs. Mini on retrosynthesis is the demo's offline set-up."""
    from unscaffold import demo

    recorded = scale == "mini" and suite == demo.SUITE
    if recorded:
        shipped = demo.DemoConfig()
        train, test = demo.demo_tasks(shipped)
        model = models.model or demo.TINY
        student = models.student or shipped.student
        hstar = models.hstar_student or (shipped.hstar_student if models.student is None else student)
        reviewer = models.reviewer or shipped.reviewer
    else:
        if models.model is None:
            raise UnscaffoldError(f"--model: {scale} scale on {suite} needs the base model (the offline mini scale "
                                  f"uses the recorded retrosynthesis students)")
        model = models.model
        student = models.student or f"hf:{model}"
        hstar = models.hstar_student or student
        reviewer = models.reviewer
        train, test = _suite_tasks(suite)
    return Resolved(model=model, student=student, hstar_student=hstar, reviewer=reviewer,
                    tiny=model in (demo.TINY, "tiny"), train=train, test=test)


def _tasks(ids: list[str]) -> list[str]:
    return ["--tasks", ",".join(ids)]


def _trained(r: Resolved, adapter: str | None) -> tuple[str, list[str]]:
    """The student spec of the base model (or an adapter on it) and the run flags the tiny model needs."""
    from unscaffold import demo

    limit, turns = demo.TINY_EVAL if r.tiny else ("", [])
    return f"hf:{r.model}{f'+{DIR}/{adapter}' if adapter else ''}{limit}", list(turns)


def _evaluate(name: str, about: str, suite: str, student: str, r: Resolved, trials: int, extra: list[str],
              after: list[str]) -> Stage:
    argv = ["run", suite, "--student", student, *_tasks(r.test), "--trials", str(trials), *extra,
            "--out", f"{DIR}/{name}"]
    return Stage(name=name, about=about, argv=argv, out=name, after=after, resumes=True,
                 cost=Cost(rollouts=len(r.test) * trials))


def harness_zero(suite: str, scale: Scale, models: Models, eval_trials: int) -> Plan:
    """h* -> K -> base under h and h* -> reviewed collection per budget -> build-sft -> train-sft -> tuned under
    h -> behaviour recovery."""
    from unscaffold import demo
    from unscaffold.benchmarks import load_suite

    r = resolve(suite, scale, models)
    if r.reviewer is None:
        raise UnscaffoldError(f"--reviewer: Harness-Zero on {suite} needs a reviewer model spec")
    with load_suite(suite) as loaded:
        bank = loaded.bank_path()
    if bank is None:
        raise UnscaffoldError(f"--suite: {suite} ships no h* bank; evolve one first (unscaffold evolve)")
    stages = [
        Stage(name="compile-k", about="compile the h* bank into the reviewer's reference K",
              argv=["compile-k", str(bank), "--out", f"{DIR}/K", "--suite", suite], out="K", reads=[str(bank)]),
        _evaluate("base-h", "the base student under the minimal harness h", suite, r.student, r, eval_trials, [], []),
        _evaluate("base-hstar", "the base student under the optimised harness h*", suite, r.hstar_student, r,
                  eval_trials, ["--harness", "hstar"], []),
    ]
    sft_args = demo.TINY_SFT_ARGS + ["--max-steps", str(demo.DemoConfig().sft_steps)] if r.tiny else []
    sft_steps = demo.DemoConfig().sft_steps if r.tiny else 0
    for budget in MINI_BUDGETS if scale == "mini" else PAPER_BUDGETS:
        b = f"b{budget}"
        stages += [
            Stage(name=f"collect-{b}", about=f"reviewed collection on the train split, REPLACE budget {budget}",
                  argv=["run", suite, "--student", r.student, "--reviewer", r.reviewer, "--knowledge", f"{DIR}/K",
                        "--budget", str(budget), *_tasks(r.train), "--out", f"{DIR}/collect-{b}"],
                  out=f"collect-{b}", after=["compile-k"], resumes=True,
                  cost=Cost(rollouts=len(r.train), reviewer_calls=len(r.train) * budget)),
            Stage(name=f"build-sft-{b}", about="the SFT rows: filter, audit, leak scrub, masks",
                  argv=["build-sft", f"{DIR}/collect-{b}", "--out", f"{DIR}/sft-{b}.jsonl"], out=f"sft-{b}.jsonl",
                  after=[f"collect-{b}"]),
            Stage(name=f"train-sft-{b}", about="LoRA SFT of the base model on the accepted steps",
                  argv=["train-sft", f"{DIR}/sft-{b}.jsonl", "--model", r.model, *sft_args,
                        "--out", f"{DIR}/adapter-{b}"], out=f"adapter-{b}", after=[f"build-sft-{b}"],
                  cost=Cost(training_steps=sft_steps)),
        ]
        student, turns = _trained(r, f"adapter-{b}")
        stages.append(_evaluate(f"tuned-{b}", "the tuned model under h alone (no reviewer, K or h*)", suite,
                                student, r, eval_trials, turns, [f"train-sft-{b}"]))
    top = f"b{(MINI_BUDGETS if scale == 'mini' else PAPER_BUDGETS)[0]}"
    stages.append(Stage(
        name="behaviors", about="behaviour recovery: which h* behaviours moved into the weights",
        argv=["behaviors", "--base-h", f"{DIR}/base-h", "--base-hstar", f"{DIR}/base-hstar", "--tuned",
              f"{DIR}/tuned-{top}", "--taught", f"{DIR}/sft-{top}.jsonl", "--min-eligible",
              "1" if scale == "mini" else "10", "--json", "--out", f"{DIR}/behaviors.html"],
        out="behaviors.json", stdout=True, after=["base-h", "base-hstar", f"tuned-{top}", f"build-sft-{top}"]))
    return Plan(recipe="harness-zero", suite=suite, scale=scale, model=r.model, train=r.train, test=r.test,
                eval_trials=eval_trials, stages=stages)


def harness_s(suite: str, scale: Scale, models: Models, eval_trials: int) -> Plan:
    """GRPO without rescue -> same-harness rescue -> rescue with each router -> evaluation under h -> rank-1
    routing, all from the same base model on the same train tasks."""
    from unscaffold.rescue.pool import shipped_pool

    r = resolve(suite, scale, models)
    pool = shipped_pool(suite)
    mini = scale == "mini"
    steps, k = (2, 4) if mini else (len(r.train) // 4 * 3, 8)  # paper: 3 epochs of 4 tasks a step, K = 8
    train_args = (["--k", str(k), "--tasks-per-step", "1", "--steps-per-generation", "1",
                   "--max-completion-length", "48"] if mini else ["--k", str(k)])
    base, turns = _trained(r, None)
    stages = [_evaluate("base-h", "the base model itself under h", suite, base, r, eval_trials, turns, [])]
    rollouts = steps * k * (1 if mini else 4)
    for router in ("none", *(MINI_ROUTERS if mini else PAPER_ROUTERS)):
        name = f"rescue-{router}"
        about = "plain GRPO (no rescue)" if router == "none" else f"rescue GRPO, router {router}"
        stages.append(Stage(
            name=name, about=about,
            argv=["rescue", "train", suite, "--model", r.model, *_tasks(r.train), "--router", router,
                  "--max-steps", str(steps), *train_args, "--out", f"{DIR}/{name}"],
            out=name, reads=[str(pool.parent)],
            cost=Cost(rollouts=rollouts, training_steps=steps)))
        student, turns = _trained(r, f"{name}/adapter")
        stages.append(_evaluate(f"eval-{router}", f"the {about} model under h", suite, student, r, eval_trials,
                                turns, [name]))
    best = "random" if mini else "adaptive"
    student, turns = _trained(r, f"rescue-{best}/adapter")
    stages.append(_evaluate("routed", f"rank-1 routing of the {best}-router model over the pool", suite, student, r,
                            eval_trials, ["--harness", "route:shipped", "--router",
                                          f"{DIR}/rescue-{best}/router.json", *turns], [f"rescue-{best}"]))
    return Plan(recipe="harness-s", suite=suite, scale=scale, model=r.model, train=r.train, test=r.test,
                eval_trials=eval_trials, stages=stages)


def build_plan(recipe: str, suite: str, scale: Scale, models: Models, eval_trials: int) -> Plan:
    if recipe == "harness-zero":
        return harness_zero(suite, scale, models, eval_trials)
    if recipe == "harness-s":
        return harness_s(suite, scale, models, eval_trials)
    raise UnscaffoldError(f"RECIPE: unknown recipe {recipe!r}; expected harness-zero or harness-s")
