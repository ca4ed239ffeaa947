"""`unscaffold reproduce RECIPE --suite S`: write (or read) the plan, check it against the other recipe's,
run what is not finished and write the table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field
from rich.console import Console

from unscaffold.console import out_console
from unscaffold.errors import UnscaffoldError, did_you_mean
from unscaffold.flags import flag
from unscaffold.reproduce.plan import RECIPES, Plan, load_plan, write_plan
from unscaffold.reproduce.recipes import Models, Sources, build_plan
from unscaffold.specs import ModelSpec, ReviewerSpec, read_as

PLAN = "plan.toml"


class ReproduceConfig(BaseModel):
    """Every setting of `unscaffold reproduce`; flags name the fields."""

    recipe: str = Field(description="harness-zero or harness-s.")
    suite: str = Field(description="Suite to reproduce on.", json_schema_extra=flag("--suite"))
    scale: str = Field("mini", description="mini (offline, the built-in models, minutes to an hour on two cores) or "
                       "paper (the published budgets and settings, for real model specs).",
                       json_schema_extra=flag("--scale"))
    out: Path | None = Field(None, description="Folder of both recipes' plans, runs and tables (default: "
                             "runs/reproduce/SUITE-SCALE).", json_schema_extra=flag("--out"))
    plan: Path | None = Field(None, description="A plan TOML to run instead of the generated one.",
                              json_schema_extra=flag("--plan"))
    from_stage: str | None = Field(None, description="Rerun from this stage on, finished or not.",
                                   json_schema_extra=flag("--from"))
    dry_run: bool = Field(False, description="Print every command and its cost estimate; run nothing.",
                          json_schema_extra=flag("--dry-run"))
    model: str | None = Field(None, description="Base model both recipes train (default at mini scale: the "
                              "built-in tiny model).", json_schema_extra=flag("--model"))
    student: Annotated[ModelSpec | None, read_as(ModelSpec, "--student", oracle=True)] = Field(
        None, description="Base student spec under h (default: the base model; at mini scale the recorded demo "
        "student).", json_schema_extra=flag("--student"))
    hstar_student: Annotated[ModelSpec | None, read_as(ModelSpec, "--hstar-student", oracle=True)] = Field(
        None, description="Base student spec under h* (default: --student).",
        json_schema_extra=flag("--hstar-student"))
    reviewer: Annotated[ReviewerSpec | None, read_as(ReviewerSpec, "--reviewer")] = Field(
        None, description="Reviewer spec of the Harness-Zero collection (default at mini scale: the recorded demo "
        "reviewer).", json_schema_extra=flag("--reviewer"))
    eval_trials: int = Field(1, ge=1, description="Trials per test task in every evaluation.",
                             json_schema_extra=flag("--eval-trials"))
    data: Path | None = Field(None, description="The suite's data (a folder of Harbor tasks, real data), passed to "
                              "every stage that loads the suite.", json_schema_extra=flag("--data"))
    split_file: Path | None = Field(None, description="The data's splits (JSON or text, see splits/README.md): "
                                    "train tasks collect and train, test tasks evaluate.",
                                    json_schema_extra=flag("--split-file"))
    bank: Path | None = Field(None, description="An h* bank folder compiled into K and run as h* (default: the "
                              "suite's own).", json_schema_extra=flag("--bank"))

    def folder(self) -> Path:
        return self.out or Path("runs") / "reproduce" / f"{self.suite}-{self.scale}"


def _check_recipe(config: ReproduceConfig) -> None:
    if config.recipe not in RECIPES:
        raise UnscaffoldError(f"RECIPE: unknown recipe {config.recipe!r}; expected {' or '.join(RECIPES)}"
                              f"{did_you_mean(config.recipe, RECIPES)}")
    if config.scale not in ("mini", "paper"):
        raise UnscaffoldError(f"--scale: {config.scale!r} is not mini or paper")


def prepare(config: ReproduceConfig) -> tuple[Plan, Path]:
    """The plan to run and its folder. A plan already in the folder is kept (a user may have edited it) unless
    the flags name other settings, which is refused rather than silently overwritten."""
    _check_recipe(config)
    folder = config.folder() / config.recipe
    path = folder / PLAN
    if config.plan is not None:
        plan = load_plan(config.plan)
        if plan.recipe != config.recipe:
            raise UnscaffoldError(f"{config.plan}: recipe {plan.recipe!r} differs from {config.recipe!r}")
    elif path.exists():
        plan = load_plan(path)
        wanted = {"suite": config.suite, "scale": config.scale, "model": config.model,
                  "eval_trials": config.eval_trials}
        for key, value in wanted.items():
            if value is not None and getattr(plan, key) != value:
                raise UnscaffoldError(f"{path}: {key} {getattr(plan, key)!r} differs from the flags' {value!r}; "
                                      "pass another --out, or --plan with an edited copy")
    else:
        text = {name: str(spec) if (spec := getattr(config, name)) else None  # a plan holds command lines
                for name in ("student", "hstar_student", "reviewer")}
        models = Models(model=config.model, student=text["student"], hstar_student=text["hstar_student"],
                        reviewer=text["reviewer"])
        sources = Sources(data=config.data, split_file=config.split_file, bank=config.bank)
        plan = build_plan(config.recipe, config.suite, config.scale, models, config.eval_trials,  # type: ignore[arg-type]
                          sources)
    check_shared(plan, config.folder())
    if config.plan is None or config.plan.resolve() != path.resolve():
        folder.mkdir(parents=True, exist_ok=True)
        write_plan(plan, path)
    return plan, folder


def check_shared(plan: Plan, root: Path) -> None:
    """Both recipes of one folder start from one base model, one split and one evaluation budget: a table that
    compares them would otherwise compare unlike with unlike."""
    for recipe in RECIPES:
        other_path = root / recipe / PLAN
        if recipe == plan.recipe or not other_path.exists():
            continue
        other = load_plan(other_path)
        if other.model != plan.model:
            raise UnscaffoldError(f"{other_path}: base model {other.model!r} differs from {plan.recipe}'s "
                                  f"{plan.model!r}; both recipes must train one base model")
        if other.eval_trials != plan.eval_trials:
            raise UnscaffoldError(f"{other_path}: eval_trials {other.eval_trials} differs from {plan.recipe}'s "
                                  f"{plan.eval_trials}; both recipes must be evaluated alike")
        leaked = sorted((set(other.train) & set(plan.test)) | (set(plan.train) & set(other.test)))
        if leaked:
            raise UnscaffoldError(f"{other_path}: task {leaked[0]!r} is a train task of one recipe and a test task "
                                  f"of the other ({len(leaked)} such); both must use one split")
        if other.test != plan.test:
            raise UnscaffoldError(f"{other_path}: its test tasks differ from {plan.recipe}'s; both recipes must be "
                                  "evaluated on the same tasks")


def dry_run(plan: Plan, folder: Path, console: Console) -> None:
    from rich.table import Table

    table = Table(title=f"reproduce {plan.recipe} --suite {plan.suite} --scale {plan.scale}: {folder / PLAN}")
    for name in ("stage", "rollouts", "reviewer calls", "training steps"):
        table.add_column(name, justify="left" if name == "stage" else "right")
    for stage in plan.stages:
        console.print(f"{stage.name}: {stage.shown(folder)}", highlight=False,
                      soft_wrap=True)
        table.add_row(stage.name, *(str(v) for v in stage.cost.model_dump().values()))
    total = plan.estimate()
    table.add_row("total", *(str(v) for v in total.model_dump().values()), style="bold")
    console.print(table)


def reproduce(config: ReproduceConfig, console: Console | None = None) -> Path:
    """Run the plan; returns the folder holding table.md/html/json."""
    from unscaffold.reproduce.execute import execute
    from unscaffold.reproduce.table import build_table, write_table

    console = console or out_console()
    plan, folder = prepare(config)
    if config.dry_run:
        dry_run(plan, folder, console)
        return folder
    execute(plan, folder, start=config.from_stage, console=console)
    table = build_table(plan, folder)
    write_table(table, folder, console)
    return folder
