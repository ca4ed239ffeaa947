"""The reproduced table: the paper's rows for a recipe, each cell labelled measured (run folder, 95% interval
over tasks) or published (source, set-up), with the cost columns beside the scores."""

from __future__ import annotations

import html
import json
from pathlib import Path

from pydantic import BaseModel, Field
from rich.console import Console

from unscaffold.iojson import write_json_atomic, write_text_atomic
from unscaffold.pages.document import page
from unscaffold.pages.document import table_html as document_table
from unscaffold.reproduce import published as pub
from unscaffold.reproduce.plan import Plan
from unscaffold.reproduce.recipes import MINI_BUDGETS, PAPER_BUDGETS, PAPER_ROUTERS
from unscaffold.run.folder import RunFolder


class Measured(BaseModel):
    value: float = Field(description="percent")
    low: float
    high: float
    metric: str = Field(description="what the value is, e.g. pass@1 over 6 test tasks x 1 trial")
    run: str = Field(description="the run folder, relative to the plan folder")


class Cost(BaseModel):
    """What producing the row's model cost, in the same units for both recipes."""

    rollouts: int = Field(description="student episodes spent on training data (collection or RL rollouts)")
    reviewer_calls: int = 0
    training_steps: int = Field(description="optimiser steps")
    wall_s: float = Field(description="seconds of collection and training")


class Row(BaseModel):
    label: str
    measured: Measured | None = None
    published: pub.Published | None = None
    cost: Cost | None = None
    extra: dict[str, float | None] = Field(default_factory=dict, description="further measured figures (percent)")
    extra_published: dict[str, float] = Field(default_factory=dict)
    note: str = ""


class Table(BaseModel):
    recipe: str
    suite: str
    scale: str
    model: str
    metric: str
    published_metric: str
    rows: list[Row]
    notes: list[str] = Field(default_factory=list)


def _measured(folder: Path, run: str) -> Measured | None:
    from unscaffold.behaviors.runs import load_run
    from unscaffold.behaviors.stats import bootstrap
    from unscaffold.errors import UnscaffoldError

    try:
        record = load_run(folder / run)
    except UnscaffoldError:
        return None
    per_task = record.success()
    ci = bootstrap(list(per_task.values()))
    metric = f"pass@1 over {len(per_task)} test tasks x {record.results.n_trials // max(1, len(per_task))} trials"
    return Measured(value=ci.value, low=ci.low, high=ci.high, metric=metric, run=run)


def _read(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def _sft_cost(collected: dict, trained: dict) -> Cost:
    """A distilled row's cost: its collection's trials and reviewer calls, its SFT's steps, both's seconds."""
    return Cost(rollouts=collected.get("n_trials", 0), reviewer_calls=collected.get("reviewer_calls", 0),
                training_steps=trained.get("steps", 0),
                wall_s=round(collected.get("wall_time_s", 0.0) + trained.get("train_seconds", 0.0), 1))


def _harness_zero(plan: Plan, folder: Path) -> Table:
    rows = [Row(label="base + h", measured=_measured(folder, "base-h"),
                published=pub.harness_zero_cell("base + h", plan.suite)),
            Row(label="base + h*", measured=_measured(folder, "base-hstar"),
                published=pub.harness_zero_cell("base + h*", plan.suite))]
    budgets = MINI_BUDGETS if plan.scale == "mini" else PAPER_BUDGETS
    for budget in budgets:
        b = f"b{budget}"
        collected = _read(RunFolder(folder / f"collect-{b}").results)
        cost = _sft_cost(collected, _read(folder / f"adapter-{b}" / "summary.json"))
        rows.append(Row(label=f"distilled + h (budget {budget})", measured=_measured(folder, f"tuned-{b}"),
                        published=pub.harness_zero_cell("distilled + h", plan.suite) if budget == budgets[0] else None,
                        cost=cost, extra={"replacements": collected.get("replacements")}))
    for stage in plan.stages:
        if not stage.name.startswith("tuned-abl-"):
            continue
        name = stage.name.removeprefix("tuned-abl-")
        cost = _sft_cost(_read(RunFolder(folder / f"collect-abl-{name}").results),
                         _read(folder / f"adapter-abl-{name}" / "summary.json"))
        rows.append(Row(label=f"ablation: {name}", measured=_measured(folder, stage.name), cost=cost,
                        published=pub.ablation_cell(name, plan.suite), note=stage.about))
    behaviors = _read(folder / "behaviors.json")
    rates = [b["rate"] / 100 for b in behaviors.get("behaviors", []) if b.get("rate") is not None]
    if behaviors:
        from unscaffold.behaviors.stats import bootstrap

        ci = bootstrap(rates)
        measured = Measured(value=ci.value, low=ci.low, high=ci.high, run="behaviors.json",
                            metric=f"mean recovery over {len(rates)} behaviours of this suite")
        rows.append(Row(label="behaviour recovery", measured=measured if rates else None,
                        published=pub.Published(value=pub.RECOVERY_POOLED_MEAN, source=pub.HZ_SOURCE,
                                                setup="pooled over 28 behaviours of three domains"),
                        note="the published figure pools three domains; one suite's mean is not that figure"))
    notes = []
    base = plan.stage("base-h").argv
    student = base[base.index("--student") + 1] if "--student" in base else ""
    if not student.startswith(f"hf:{plan.model}"):
        notes.append(f"the base rows are the student {student}, not the base model {plan.model} itself")
    if plan.scale == "mini" and plan.model == "smollm2-135m":
        notes.append("mini scale with a real model: SmolLM2-135M-Instruct (135 M parameters) on the given tasks; "
                     "a small model's effect on its data, not the published result")
    elif plan.scale == "mini":
        notes.append("mini scale: recorded students and reviewer and the built-in tiny model (2 layers); the "
                     "measured figures show the pipeline at work, not the published effect")
    return Table(recipe=plan.recipe, suite=plan.suite, scale=plan.scale, model=plan.model,
                 metric="pass@1 (percent), 95% bootstrap interval over test tasks",
                 published_metric="pass@1 (percent) of the published main table", rows=rows, notes=notes)


LABELS = {"none": "GRPO", "same": "same-harness rescue"}


def _harness_s(plan: Plan, folder: Path) -> Table:
    rows = [Row(label="base model + h", measured=_measured(folder, "base-h"))]
    routers = [s.name.removeprefix("rescue-") for s in plan.stages if s.name.startswith("rescue-")]
    for router in routers:
        label = LABELS.get(router, "Harness-S")
        summary = _read(folder / f"rescue-{router}" / "summary.json")
        cost = Cost(rollouts=summary.get("rollouts", 0), training_steps=summary.get("steps", 0),
                    wall_s=round(summary.get("wall_s", 0.0), 1)) if summary else None
        rate = summary.get("effective_group_rate")
        untrained = summary.get("trained") is False
        published_row = label if router in ("none", "same") or router == PAPER_ROUTERS[-1] else ""
        rows.append(Row(
            label=label if router in LABELS else f"{label} (router {router})",
            measured=_measured(folder, f"eval-{router}"),
            published=pub.harness_s_cell(pub.HARNESS_S_AVG3, published_row, plan.suite), cost=cost,
            extra={"effective group rate": None if rate is None else round(100 * rate, 2),
                   "extra rollouts": summary.get("extra_rollout_pct")},
            note=f"not trained: {summary.get('not_trained_reason') or 'no update moved the weights'}"
            if untrained else "",
            extra_published={k: v for k, v in (
                ("effective group rate", pub.HARNESS_S_EFFECTIVE.get(published_row)),
                ("extra rollouts", pub.HARNESS_S_EXTRA_ROLLOUTS.get(published_row)))
                if v is not None and plan.suite in pub.HS_PUBLISHED_SUITES}))
    routed = next((s for s in plan.stages if s.name == "routed"), None)
    if routed is not None:
        rows.append(Row(label="Harness-S + rank-1 routing", measured=_measured(folder, "routed"),
                        published=pub.harness_s_cell(pub.HARNESS_S_AVG3, "Harness-S + rank-1 routing", plan.suite),
                        note=routed.about))
    notes = []
    if plan.suite not in pub.HS_PUBLISHED_SUITES:
        notes.append(f"the published Harness-S figures are AppWorld's; none is shown beside {plan.suite}")
    if plan.scale == "mini":
        notes.append("mini scale: the built-in tiny model, 2 GRPO steps of K = 4; the measured figures show the "
                     "pipeline at work, not the published effect")
    return Table(recipe=plan.recipe, suite=plan.suite, scale=plan.scale, model=plan.model,
                 metric="pass@1 (percent) under h, 95% bootstrap interval over test tasks",
                 published_metric="Avg@3 (percent), AppWorld, 4B", rows=rows, notes=notes)


def build_table(plan: Plan, folder: Path) -> Table:
    return _harness_zero(plan, folder) if plan.recipe == "harness-zero" else _harness_s(plan, folder)


def _cell(m: Measured | None) -> str:
    return "not run" if m is None else f"{m.value:.1f} [{m.low:.1f}, {m.high:.1f}]"


def _cost(c: Cost | None) -> list[str]:
    return ["-"] * 4 if c is None else [str(c.rollouts), str(c.reviewer_calls), str(c.training_steps),
                                        f"{c.wall_s:.0f}"]


def _extra(row: Row) -> str:
    parts = []
    for key, value in row.extra.items():
        if value is None:
            continue
        published = row.extra_published.get(key)
        parts.append(f"{key} {value:.1f}" + (f" (published {published:.2f})" if published is not None else ""))
    return "; ".join(parts)


HEAD = ["row", "measured", "published", "rollouts", "reviewer calls", "training steps", "wall s", "also"]


def _cells(row: Row) -> list[str]:
    published = "-" if row.published is None else f"{row.published.value:.2f}"
    return [row.label, _cell(row.measured), published, *_cost(row.cost), _extra(row)]


def _sources(table: Table) -> list[str]:
    lines = [f"measured: {table.metric}; each from its run folder (below)",
             f"published: {table.published_metric}"]
    for row in table.rows:
        if row.measured is not None:
            lines.append(f"{row.label}: measured from {row.measured.run} ({row.measured.metric})")
        if row.published is not None:
            lines.append(f"{row.label}: published, {row.published.source}; set-up: {row.published.setup}")
        if row.note:
            lines.append(f"{row.label}: {row.note}")
    return lines + table.notes


def table_markdown(table: Table) -> str:
    lines = [f"# {table.recipe} on {table.suite} ({table.scale} scale, base model {table.model})", "",
             "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(row)) + " |" for row in table.rows]
    return "\n".join([*lines, "", *(f"- {s}" for s in _sources(table))]) + "\n"


def table_html(table: Table) -> str:
    e = html.escape
    notes = "".join(f"<li>{e(s)}</li>" for s in _sources(table))
    return page(f"{table.recipe} on {table.suite}",
                f"<h1>{e(table.recipe)} on {e(table.suite)}</h1><p>{e(table.scale)} scale, base model "
                f"{e(table.model)}</p>{document_table(HEAD, [_cells(row) for row in table.rows])}<ul>{notes}</ul>")


def write_table(table: Table, folder: Path, console: Console) -> None:
    from unscaffold.behaviors.terminal import print_grid, print_lines

    write_json_atomic(folder / "table.json", table.model_dump(mode="json"))
    write_text_atomic(folder / "table.md", table_markdown(table))
    write_text_atomic(folder / "table.html", table_html(table))

    # a table where it fits the terminal, one block a row where it does not (a log, 80 columns)
    print_grid(console, f"{table.recipe} on {table.suite} ({table.scale})", (HEAD, [_cells(r) for r in table.rows]))
    print_lines(console, [f"- {line}" for line in _sources(table)])
    console.print(f"table: {folder / 'table.md'}  {folder / 'table.html'}  {folder / 'table.json'}",
                  highlight=False, soft_wrap=True)
