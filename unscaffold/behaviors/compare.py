"""`unscaffold compare`: runs of one suite and split side by side, each labelled from its own records.

Scores carry bootstrap intervals over tasks (scenarios for SGC), each run is paired task by task with
the baseline, costs come from the runs' records, and behaviour recovery is added when the runs hold
one base + h run, one base + h* run and at least one trained model under h."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel, Field

from unscaffold.behaviors.labels import RunLabel
from unscaffold.behaviors.recovery import RecoveryTable, Rule, RunReading, check_roles, recovery_table
from unscaffold.behaviors.runs import RunRecord, check_comparable
from unscaffold.behaviors.stats import SAMPLES, Interval, Paired, bootstrap, paired
from unscaffold.behaviors.taught import Taught
from unscaffold.collect.aggregate import SUCCESS
from unscaffold.errors import UnscaffoldError


class Cost(BaseModel):
    student_calls: int
    student_tokens: dict[str, int]
    reviewer_calls: int
    reviewer_tokens: dict[str, int]
    cost_usd: float
    wall_time_s: float
    trial_wall_s: float
    student_rollouts: int = Field(description="trials of this run (one student rollout each)")
    training_method: str | None = None
    training_steps: int | None = None
    rollouts: int | None = Field(None, description="student rollouts the training generated (rescue train)")
    training_wall_s: float | None = None


class RunRow(BaseModel):
    run: str
    label: str
    what: RunLabel
    student: str
    n_tasks: int
    n_trials: int
    scores: dict[str, Interval] = Field(description="pass_at_1, and tgc / sgc where the suite defines them")
    vs_baseline: Paired | None = Field(description="pass@1 per task minus the baseline's; None for the baseline")
    cost: Cost


class Published(BaseModel):
    """A published rescue-training figure, shown beside ours and never mixed with it."""

    method: str
    effective_group_rate: float = Field(description="percent")
    extra_rollout_pct: float | None = Field(description="percent of plain GRPO's rollouts")


PUBLISHED_SOURCE = ("published figures: Harness-S, AppWorld, 4B; effective group rate: share of training groups "
                    "with a non-zero advantage; extra rollouts: training rollouts beyond plain GRPO's 2,560, in % "
                    "of them (Harness-S 3,032 rollouts: +18.44%; same-harness rescue: +41.25%)")
PUBLISHED_RESCUE = {
    "none": Published(method="GRPO", effective_group_rate=64.69, extra_rollout_pct=0.0),
    "same": Published(method="same-harness rescue", effective_group_rate=70.94, extra_rollout_pct=41.25),
    "adaptive": Published(method="Harness-S (adaptive router)", effective_group_rate=79.38, extra_rollout_pct=18.44),
}


ABLATION_SOURCE = "published (Harness-Zero data-source ablation, USPTO test pass@1 after SFT)"
# build-sft `source` label -> the published figures of SFT on rows of that source
PUBLISHED_ABLATION: dict[str, list[tuple[str, float]]] = {
    "reviewer_k": [("reviewer with K", 30.0)],
    "empty_k": [("empty K", 11.0)],
    "gold_reviewer": [("reviewer that reads the gold answer", 15.0)],
    "hstar": [("strong model with h*", 3.0), ("student with h*", 12.0)],
    "unreviewed": [("strong model alone", 12.0)],
}


class AblationRow(BaseModel):
    """A distilled run trained on rows of one source, beside the published figure(s) for that source."""

    run: str
    source: str
    pass_at_1: float = Field(description="percent, this run")
    published: list[tuple[str, float]]


class RescueMethodRow(BaseModel):
    """One rescue-trained model's training figures beside the paper's for the same method."""

    run: str
    method: str
    effective_group_rate: float | None = Field(description="percent, over the training steps")
    extra_rollout_pct: float | None
    rollouts: int | None
    published: Published | None


class Comparison(BaseModel):
    suite: str
    split: str | None
    n_tasks: int
    baseline: str
    seed: int
    samples: int = SAMPLES
    runs: list[RunRow]
    recovery: list[RecoveryTable] = Field(default_factory=list)
    recovery_note: str
    rescue_methods: list[RescueMethodRow] = Field(default_factory=list)
    published_source: str = PUBLISHED_SOURCE
    ablation: list[AblationRow] = Field(default_factory=list, description="distilled runs whose rows came from one "
                                        "source, beside the published ablation figure (USPTO runs only)")
    ablation_source: str = ABLATION_SOURCE


def ablation(rows: list[RunRow], suite: str) -> list[AblationRow]:
    """The published data-source ablation is chemistry's: shown for the retrosynthesis suite only, and only
    for an adapter trained on rows of a single source (a mixture has no published figure)."""
    if suite != "retrosynthesis":
        return []
    out = []
    for r in rows:
        t = r.what.training
        if t is None or t.recipe != "sft" or len(t.data_sources) != 1:
            continue
        [source] = t.data_sources
        if source in PUBLISHED_ABLATION:
            out.append(AblationRow(run=r.label, source=source, pass_at_1=r.scores["pass_at_1"].value,
                                   published=PUBLISHED_ABLATION[source]))
    return out


def rescue_methods(rows: list[RunRow]) -> list[RescueMethodRow]:
    out = []
    for r in rows:
        t = r.what.training
        if t is None or t.recipe != "rescue":
            continue
        rate = None if t.effective_group_rate is None else 100.0 * t.effective_group_rate
        out.append(RescueMethodRow(run=r.label, method=t.method or "?", effective_group_rate=rate,
                                   extra_rollout_pct=t.extra_rollout_pct, rollouts=t.rollouts,
                                   published=PUBLISHED_RESCUE.get(t.method or "")))
    return out


def scores(run: RunRecord, seed: int) -> dict[str, Interval]:
    out = {"pass_at_1": bootstrap(list(run.success().values()), seed=seed)}
    if "tgc" in (run.results.model_extra or {}):
        out["tgc"] = bootstrap([sum(t.reward for t in ts) / len(ts) for ts in run.by_task.values()], seed=seed)
    if "sgc" in (run.results.model_extra or {}):
        scenarios: dict[str, list[bool]] = defaultdict(list)
        for task, trials in run.by_task.items():
            scenarios[trials[0].scenario or task].extend(t.reward >= SUCCESS for t in trials)
        out["sgc"] = bootstrap([float(all(v)) for v in scenarios.values()], seed=seed)
    return out


def cost(run: RunRecord, label: RunLabel) -> Cost:
    tokens = run.results.tokens
    return Cost(
        student_calls=sum(t.turns for t in run.trials), student_tokens=tokens.get("student", {}),
        reviewer_calls=run.results.reviewer_calls, reviewer_tokens=tokens.get("reviewer", {}),
        cost_usd=run.results.cost_usd, wall_time_s=run.results.wall_time_s, trial_wall_s=run.results.trial_wall_s,
        student_rollouts=len(run.trials), training_method=label.training.method if label.training else None,
        training_steps=label.training.steps if label.training else None,
        rollouts=label.training.rollouts if label.training else None,
        training_wall_s=label.training.wall_s if label.training else None,
    )


def unique_labels(labels: list[RunLabel], runs: list[RunRecord]) -> list[str]:
    """Each run's label; equal labels are told apart by the training method, else by the run folder."""
    texts = [lab.text for lab in labels]
    methods = [f"{t} ({lab.training.method})" if lab.training and lab.training.method else t
               for t, lab in zip(texts, labels, strict=True)]
    return [t if texts.count(t) == 1 else m if methods.count(m) == 1 else f"{t} ({r.path.name})"
            for t, m, r in zip(texts, methods, runs, strict=True)]


def add_recovery(runs: list[RunRecord], labels: list[RunLabel], *, rule: Rule, min_eligible: int,
                 bank: Path | None, taught: Taught | None = None) -> tuple[list[RecoveryTable], str]:
    """`taught` (SFT rows counted per behaviour) goes with the distilled runs only: the rows trained them."""
    plain = [(r, lab) for r, lab in zip(runs, labels, strict=True) if not lab.reviewer]
    base_h = [r for r, lab in plain if lab.kind == "base" and lab.harness == "h"]
    base_hstar = [r for r, lab in plain if lab.kind == "base" and lab.harness.startswith("h*")]
    tuned = [r for r, lab in plain if lab.kind not in ("base", "oracle") and lab.harness == "h"]
    kinds = {r.name: lab.kind for r, lab in plain}
    if len(base_h) != 1 or len(base_hstar) != 1 or not tuned:
        return [], (f"behaviour recovery needs one base + h run, one base + h* run and a trained model under h; "
                    f"found {len(base_h)}, {len(base_hstar)} and {len(tuned)}")
    notes = check_roles(base_h[0], base_hstar[0], tuned)
    cache: dict[str, RunReading] = {}
    tables = [recovery_table(base_h[0], base_hstar[0], t, rule=rule, min_eligible=min_eligible, bank=bank,
                             notes=notes, cache=cache, taught=taught if kinds[t.name] == "distilled" else None)
              for t in tuned]
    return tables, (f"behaviour recovery of {len(tuned)} trained run(s) against {base_h[0].name} (base + h) and "
                    f"{base_hstar[0].name} (base + h*)")


def compare(runs: list[RunRecord], *, baseline: Path | None = None, seed: int = 0, rule: Rule = "any",
            min_eligible: int = 10, bank: Path | None = None, taught: Taught | None = None) -> Comparison:
    if len({r.path.resolve() for r in runs}) != len(runs):
        raise UnscaffoldError("compare: a run is named twice")
    check_comparable(runs)
    base = runs[0]
    if baseline is not None:
        base = next((r for r in runs if r.path.resolve() == Path(baseline).resolve()), None)  # type: ignore[assignment]
        if base is None:
            raise UnscaffoldError(f"--baseline {baseline}: not one of the compared runs")
    labels = [r.label() for r in runs]
    names = unique_labels(labels, runs)
    reference = base.success()
    rows = [RunRow(run=r.name, label=name, what=lab, student=r.results.student, n_tasks=len(r.tasks()),
                   n_trials=len(r.trials), scores=scores(r, seed),
                   vs_baseline=None if r is base else paired(r.success(), reference, seed=seed), cost=cost(r, lab))
            for r, lab, name in zip(runs, labels, names, strict=True)]
    tables, note = add_recovery(runs, labels, rule=rule, min_eligible=min_eligible, bank=bank, taught=taught)
    return Comparison(suite=base.results.suite, split=base.results.split, n_tasks=len(base.tasks()),
                      baseline=base.name, seed=seed, runs=rows, recovery=tables, recovery_note=note,
                      rescue_methods=rescue_methods(rows), ablation=ablation(rows, base.results.suite))
