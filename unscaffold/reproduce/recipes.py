"""The two recipes as plans: which commands, in which order, over which tasks, at which scale.

`mini` runs the whole plan offline on two cores: the retrosynthesis suite with the demo's recorded students
and reviewer and the built-in tiny model (the demo's settings), or any suite and data with a model spec (for
example the real `smollm2-135m` on examples/harbor_words, with its own SFT and run settings); `paper` writes
the published budgets and settings (RECIPES.md) for real model specs, with the whole train and test splits."""

from __future__ import annotations

from pathlib import Path

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


class Sources(BaseModel):
    """Where the tasks and the h* bank come from; None takes the suite's own."""

    data: Path | None = Field(None, description="the suite's data (a folder of Harbor tasks, real data)")
    split_file: Path | None = Field(None, description="the data's train/test split (JSON or text, splits/README.md)")
    bank: Path | None = Field(None, description="the h* bank compiled into K and run as h* (default: the suite's)")

    def flags(self) -> list[str]:
        """`--data` and `--split-file` as every stage that loads the suite takes them (absolute paths)."""
        out = ["--data", str(self.data.resolve())] if self.data else []
        return out + (["--split-file", str(self.split_file.resolve())] if self.split_file else [])

    def reads(self) -> list[str]:
        return [str(p.resolve()) for p in (self.data, self.split_file) if p is not None]


class ModelSettings(BaseModel):
    """A built-in model's settings at mini scale, beside the published recipe's (docs/models.md): its SFT
    flags, the limit its generations get (`?max_new_tokens=`) and the flags of every run of it."""

    sft: list[str]
    limit: str
    run: list[str] = Field(default_factory=list, description="flags of every run of the model")
    tuned: list[str] = Field(default_factory=list, description="flags of runs of a tuned model only")


# SmolLM2-135M-Instruct learns a one-call format from a few rows in about 25 steps of one row (NOTES.md);
# 20 steps at 5e-4 without warm-up (the recipe: 2e-4, batch 8, 2 epochs) teach it the harbor_words rows.
# A one-line file task needs two turns (write, answer), and a write command in its JSON wrapper about 100
# tokens: generations stop at 128 tokens and runs at two turns. One process generates one reply at a time, so
# trials run one at a time (more would only wait for each other, and their wait counts to the wall limit).
SMOLLM_SETTINGS = ModelSettings(
    sft=["--learning-rate", "5e-4", "--warmup-ratio", "0", "--batch-size", "1", "--per-device-batch-size", "1",
         "--max-steps", "20"],
    limit="?max_new_tokens=128", run=["--max-turns", "2"])


def model_settings(model: str) -> ModelSettings | None:
    """The mini-scale settings of a built-in model; None for any other (the recipe's defaults)."""
    from unscaffold import demo
    from unscaffold.llm import smollm

    if model in (demo.TINY, "tiny"):
        return ModelSettings(sft=[*demo.TINY_SFT_ARGS, "--max-steps", str(demo.DemoConfig().sft_steps)],
                             limit=demo.TINY_EVAL[0], tuned=list(demo.TINY_EVAL[1]))
    if model == smollm.NAME:
        return SMOLLM_SETTINGS
    return None


class Resolved(BaseModel):
    model: str
    student: str
    hstar_student: str
    reviewer: str | None
    settings: ModelSettings | None
    sources: Sources = Field(default_factory=Sources)
    train: list[str]
    test: list[str]

    def run_flags(self) -> list[str]:
        """`--data`/`--split-file` and the model's own run flags, for every run of the plan."""
        return self.sources.flags() + (self.settings.run if self.settings else [])


def _suite_tasks(suite: str, sources: Sources) -> tuple[list[str], list[str]]:
    from unscaffold.benchmarks import load_suite

    with load_suite(suite, sources.data, sources.split_file) as loaded:
        return [t.id for t in loaded.tasks("train")], [t.id for t in loaded.tasks("test")]


def _limit(student: str, settings: ModelSettings | None) -> str:
    """The generation limit of a trained spec: the student spec's own `?...` where it has one."""
    _, query, rest = student.partition("?")
    if student.startswith("hf:") and query:
        return f"?{rest}"
    return settings.limit if settings else ""


def resolve(suite: str, scale: Scale, models: Models, sources: Sources | None = None) -> Resolved:
    """The scale's defaults under the user's specs. Mini on retrosynthesis without other data is the demo's
    offline set-up; a built-in model elsewhere gets its settings, and its student spec their generation limit."""
    from unscaffold import demo

    sources = sources or Sources()
    recorded = scale == "mini" and suite == demo.SUITE and sources.data is None
    if recorded:
        shipped = demo.DemoConfig()
        train, test = demo.demo_tasks(shipped)
        model = models.model or demo.TINY
        student = models.student or str(shipped.student)  # a plan holds command lines: the specs' text
        hstar = models.hstar_student or (str(shipped.hstar_student) if models.student is None else student)
        reviewer: str | None = models.reviewer or str(shipped.reviewer)
    else:
        if models.model is None:
            raise UnscaffoldError(f"--model: {scale} scale on {suite} needs the base model (the offline mini scale "
                                  f"uses the recorded retrosynthesis students)")
        model = models.model
        settings = model_settings(model) if scale == "mini" or model in (demo.TINY, "tiny") else None
        student = models.student or f"hf:{model}{settings.limit if settings else ''}"
        hstar = models.hstar_student or student
        reviewer = models.reviewer
        train, test = _suite_tasks(suite, sources)
        return Resolved(model=model, student=student, hstar_student=hstar, reviewer=reviewer, settings=settings,
                        sources=sources, train=train, test=test)
    return Resolved(model=model, student=student, hstar_student=hstar, reviewer=reviewer,
                    settings=model_settings(model), sources=sources, train=train, test=test)


def _tasks(ids: list[str]) -> list[str]:
    return ["--tasks", ",".join(ids)]


def _trained(r: Resolved, adapter: str | None) -> tuple[str, list[str]]:
    """The student spec of the base model (or an adapter on it), with the student's generation limit, and the
    run flags a tuned built-in model needs."""
    limit = _limit(r.student, r.settings)
    return f"hf:{r.model}{f'+{DIR}/{adapter}' if adapter else ''}{limit}", list(r.settings.tuned if r.settings else [])


def _evaluate(name: str, about: str, suite: str, student: str, r: Resolved, trials: int, extra: list[str],
              after: list[str]) -> Stage:
    argv = ["run", suite, "--student", student, *_tasks(r.test), "--trials", str(trials), *extra,
            *r.run_flags(), "--out", f"{DIR}/{name}"]
    return Stage(name=name, about=about, argv=argv, out=name, after=after, resumes=True,
                 cost=Cost(rollouts=len(r.test) * trials))


def _sft_steps(args: list[str]) -> int:
    return int(args[args.index("--max-steps") + 1]) if "--max-steps" in args else 0


def harness_zero(suite: str, scale: Scale, models: Models, eval_trials: int, sources: Sources | None = None) -> Plan:
    """h* -> K -> base under h and h* -> reviewed collection per budget -> build-sft -> train-sft -> tuned under
    h -> behaviour recovery -> the comparison page."""
    from unscaffold.benchmarks import load_suite

    r = resolve(suite, scale, models, sources)
    if r.reviewer is None:
        raise UnscaffoldError(f"--reviewer: Harness-Zero on {suite} needs a reviewer model spec")
    if r.sources.bank is not None:
        bank: Path | None = r.sources.bank.resolve()
        harness = str(bank)
    else:
        with load_suite(suite, r.sources.data, r.sources.split_file) as loaded:
            bank = loaded.bank_path()
        harness = "hstar"
    if bank is None:
        raise UnscaffoldError(f"--suite: {suite} ships no h* bank; pass --bank or evolve one (unscaffold evolve)")
    data = ["--data", str(r.sources.data.resolve())] if r.sources.data else []
    stages = [
        Stage(name="compile-k", about="compile the h* bank into the reviewer's reference K",
              argv=["compile-k", str(bank), "--out", f"{DIR}/K", "--suite", suite, *data], out="K",
              reads=[str(bank), *r.sources.reads()]),
        _evaluate("base-h", "the base student under the minimal harness h", suite, r.student, r, eval_trials, [], []),
        _evaluate("base-hstar", "the base student under the optimised harness h*", suite, r.hstar_student, r,
                  eval_trials, ["--harness", harness], []),
    ]
    sft_args = r.settings.sft if r.settings else []
    sft_steps = _sft_steps(sft_args)
    for budget in MINI_BUDGETS if scale == "mini" else PAPER_BUDGETS:
        b = f"b{budget}"
        stages += [
            Stage(name=f"collect-{b}", about=f"reviewed collection on the train split, REPLACE budget {budget}",
                  argv=["run", suite, "--student", r.student, "--reviewer", r.reviewer, "--knowledge", f"{DIR}/K",
                        "--budget", str(budget), *_tasks(r.train), *r.run_flags(), "--out", f"{DIR}/collect-{b}"],
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
    if scale == "paper" and suite in ABLATION_SUITES:
        stages += _ablation(suite, r, eval_trials, harness, sft_args, sft_steps)
    top = f"b{(MINI_BUDGETS if scale == 'mini' else PAPER_BUDGETS)[0]}"
    stages.append(Stage(
        name="behaviors", about="behaviour recovery: which h* behaviours moved into the weights",
        argv=["behaviors", "--base-h", f"{DIR}/base-h", "--base-hstar", f"{DIR}/base-hstar", "--tuned",
              f"{DIR}/tuned-{top}", "--taught", f"{DIR}/sft-{top}.jsonl", "--min-eligible",
              "1" if scale == "mini" else "10", "--json", "--out", f"{DIR}/behaviors.html"],
        out="behaviors.json", stdout=True, after=["base-h", "base-hstar", f"tuned-{top}", f"build-sft-{top}"]))
    stages.append(Stage(
        name="compare", about="pass@1 of base and tuned with their 95% intervals, as one page",
        argv=["compare", f"{DIR}/base-h", f"{DIR}/base-hstar", f"{DIR}/tuned-{top}", "--out", f"{DIR}/compare.html"],
        out="compare.html", after=["base-h", "base-hstar", f"tuned-{top}"]))
    return Plan(recipe="harness-zero", suite=suite, scale=scale, model=r.model, train=r.train, test=r.test,
                eval_trials=eval_trials, stages=stages)


ABLATION_SUITES = ("retrosynthesis",)  # the published data-source ablation is chemistry's (USPTO)
# name -> (what the rows come from, the collection's extra `run` flags, build-sft's extra flags)
ABLATIONS: dict[str, tuple[str, list[str], list[str]]] = {
    "empty-k": ("the reviewer without K (its generic rules only)", ["--empty-k"], []),
    "gold": ("a reviewer that also reads the task's reference solution", ["--reviewer-reads-gold"], []),
    "hstar": ("the student's own trajectories under h* (no reviewer)", [], ["--include-hstar"]),
}


def _ablation(suite: str, r: Resolved, eval_trials: int, harness: str, sft_args: list[str],
              sft_steps: int) -> list[Stage]:
    """The data-source ablation's rows: SFT of the same base model on rows of one other source each, at the
    first published budget, evaluated under h like the main row."""
    assert r.reviewer is not None
    stages: list[Stage] = []
    budget = str(PAPER_BUDGETS[0])
    for name, (about, run_flags, build_flags) in ABLATIONS.items():
        a = f"abl-{name}"
        if name == "hstar":
            collect = ["run", suite, "--student", r.hstar_student, "--harness", harness]
            calls = 0
        else:
            collect = ["run", suite, "--student", r.student, "--reviewer", r.reviewer, "--knowledge", f"{DIR}/K",
                       "--budget", budget, *run_flags]
            calls = len(r.train) * int(budget)
        student, turns = _trained(r, f"adapter-{a}")
        stages += [
            Stage(name=f"collect-{a}", about=f"ablation: rows from {about}",
                  argv=[*collect, *_tasks(r.train), *r.run_flags(), "--out", f"{DIR}/collect-{a}"],
                  out=f"collect-{a}", after=["compile-k"], resumes=True,
                  cost=Cost(rollouts=len(r.train), reviewer_calls=calls)),
            Stage(name=f"build-sft-{a}", about="the ablation's SFT rows, labelled by their source",
                  argv=["build-sft", f"{DIR}/collect-{a}", *build_flags, "--out", f"{DIR}/sft-{a}.jsonl"],
                  out=f"sft-{a}.jsonl", after=[f"collect-{a}"]),
            Stage(name=f"train-sft-{a}", about="LoRA SFT of the base model on the ablation's rows",
                  argv=["train-sft", f"{DIR}/sft-{a}.jsonl", "--model", r.model, *sft_args,
                        "--out", f"{DIR}/adapter-{a}"], out=f"adapter-{a}", after=[f"build-sft-{a}"],
                  cost=Cost(training_steps=sft_steps)),
            _evaluate(f"tuned-{a}", f"the model trained on rows from {about}, under h", suite, student, r,
                      eval_trials, turns, [f"train-sft-{a}"]),
        ]
    return stages


def harness_s(suite: str, scale: Scale, models: Models, eval_trials: int, sources: Sources | None = None) -> Plan:
    """GRPO without rescue -> same-harness rescue -> rescue with each router -> evaluation under h -> rank-1
    routing, all from the same base model on the same train tasks."""
    from unscaffold.rescue.pool import shipped_pool

    r = resolve(suite, scale, models, sources)
    pool = shipped_pool(suite)
    mini = scale == "mini"
    steps, k = (2, 4) if mini else (len(r.train) // 4 * 3, 8)  # paper: 3 epochs of 4 tasks a step, K = 8
    train_args = (["--k", str(k), "--tasks-per-step", "1", "--steps-per-generation", "1",
                   "--max-completion-length", "48"] if mini else ["--k", str(k)])
    base, turns = _trained(r, None)
    stages = [_evaluate("base-h", "the base model itself under h", suite, base, r, eval_trials, turns, [])]
    rollouts = steps * k * (1 if mini else 4)
    routers = list(MINI_ROUTERS if mini else PAPER_ROUTERS)
    if "adaptive" in routers and r.reviewer is None:
        routers.remove("adaptive")  # its profiles are written by an LLM: --reviewer names it
    if "rule" in routers:
        stages += _validation(suite, pool, base, turns, r)
    for router in ("none", *routers):
        name = f"rescue-{router}"
        about = "plain GRPO (no rescue)" if router == "none" else f"rescue GRPO, router {router}"
        table = ["--validation", f"{DIR}/validation.json"] if router in ("rule", "adaptive") else []
        profiler = ["--profiler", r.reviewer] if router == "adaptive" and r.reviewer else []
        stages.append(Stage(
            name=name, about=about,
            argv=["rescue", "train", suite, "--model", r.model, *_tasks(r.train), "--router", router,
                  "--max-steps", str(steps), *train_args, *table, *profiler, *r.sources.flags(),
                  "--out", f"{DIR}/{name}"], after=["validation"] if table else [],
            out=name, reads=[str(pool.parent), *r.sources.reads()],
            cost=Cost(rollouts=rollouts, training_steps=steps)))
        student, turns = _trained(r, f"{name}/adapter")
        stages.append(_evaluate(f"eval-{router}", f"the {about} model under h", suite, student, r, eval_trials,
                                turns, [name]))
    best = routers[-1]
    student, turns = _trained(r, f"rescue-{best}/adapter")
    stages.append(_evaluate("routed", f"rank-1 routing of the {best}-router model over the pool", suite, student, r,
                            eval_trials, ["--harness", "route:shipped", "--router",
                                          f"{DIR}/rescue-{best}/router.json", *turns], [f"rescue-{best}"]))
    return Plan(recipe="harness-s", suite=suite, scale=scale, model=r.model, train=r.train, test=r.test,
                eval_trials=eval_trials, stages=stages)


def _validation(suite: str, pool: Path, student: str, turns: list[str], r: Resolved) -> list[Stage]:
    """The table the rule and adaptive routers read: the base model under the base harness and under each
    sibling of the pool, on the train tasks (the built-in suites have no validation split of their own)."""
    from unscaffold.rescue.pool import load_pool

    names = load_pool(pool).names
    stages = [Stage(name="pool", about="the pool's siblings as bank folders", argv=["rescue", "pool", str(pool),
                                                                                       "--out", f"{DIR}/pool"],
                    out="pool", reads=[str(pool.parent)])]
    runs = []
    for name in ("base", *names):
        harness = [] if name == "base" else ["--harness", f"{DIR}/pool/{name}", "--no-finish-checks"]
        stages.append(Stage(
            name=f"val-{name}", about=f"the base model under {'the base harness' if name == 'base' else name}",
            argv=["run", suite, "--student", student, *_tasks(r.train), *harness, *turns, *r.run_flags(),
                  "--out", f"{DIR}/val-{name}"], out=f"val-{name}", after=[] if name == "base" else ["pool"],
            resumes=True, cost=Cost(rollouts=len(r.train))))
        runs += ["--run", f"{name}={DIR}/val-{name}"]
    stages.append(Stage(name="validation", about="the routers' validation table",
                        argv=["rescue", "validation", suite, *runs, *r.sources.flags(), "--out",
                              f"{DIR}/validation.json"], out="validation.json",
                        after=[f"val-{n}" for n in ("base", *names)]))
    return stages


def build_plan(recipe: str, suite: str, scale: Scale, models: Models, eval_trials: int,
               sources: Sources | None = None) -> Plan:
    if recipe == "harness-zero":
        return harness_zero(suite, scale, models, eval_trials, sources)
    if recipe == "harness-s":
        return harness_s(suite, scale, models, eval_trials, sources)
    raise UnscaffoldError(f"RECIPE: unknown recipe {recipe!r}; expected harness-zero or harness-s")
