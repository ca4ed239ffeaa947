"""`unscaffold compare`: runs of one suite and split side by side, each labelled from its own records.

Scores carry bootstrap intervals over tasks (scenarios for SGC), each run is paired task by task with
the baseline, costs come from the runs' records, and behaviour recovery is added when the runs hold
one base + h run, one base + h* run and at least one trained model under h."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel, Field

from unscaffold.behaviors.labels import RunLabel, Training
from unscaffold.behaviors.recovery import RecoveryTable, Rule, RunReading, check_roles, recovery_table
from unscaffold.behaviors.runs import RunRecord, check_comparable
from unscaffold.behaviors.stats import SAMPLES, Interval, Paired, bootstrap, paired
from unscaffold.behaviors.taught import Taught
from unscaffold.errors import UnscaffoldError
from unscaffold.run.aggregate import SUCCESS
from unscaffold.training_record import TrainingCost, TrainingRecord, evaluation_settings


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
    training_steps: int | None = Field(None, description="optimiser steps of the training")
    rollouts: int | None = Field(None, description="student rollouts the training spent, of every kind (the SFT "
                                 "data's collection, base, rescue, filler, re-anchoring and validation)")
    training_wall_s: float | None = None
    training: TrainingCost | None = Field(None, description="the training's full cost as its record holds it; "
                                          "None for an untrained model or a training without a record")


class RunRow(BaseModel):
    run: str
    label: str
    what: RunLabel
    student: str
    n_tasks: int
    n_trials: int
    k: int = Field(1, description="trials per task (the fewest any task has): the k of Avg@k and Pass@k")
    scores: dict[str, Interval] = Field(description="pass_at_1, avg_at_k and pass_at_k (k > 1: the first k trials "
                                        "of each task), and tgc / sgc where the suite defines them")
    vs_baseline: Paired | None = Field(description="pass@1 per task minus the baseline's; None for the baseline "
                                       "and for a row that is not ranked")
    cost: Cost
    marks: list[str] = Field(default_factory=list, description="why this row is not like the baseline (another "
                             "base model, other train tasks, other evaluation settings) or not a trained model")
    ranked: bool = Field(True, description="False for a training that moved no weight: it is the base model")


PUBLISHED_SETUP = ("AppWorld (real), K = 8 rollouts per task, rescue groups of the router's siblings; the adaptive "
                   "router re-anchored at checkpoints")


class Published(BaseModel):
    """A published rescue-training figure, shown beside ours and never mixed with it."""

    method: str
    effective_group_rate: float = Field(description="percent")
    extra_rollout_pct: float | None = Field(description="percent of plain GRPO's rollouts")
    setup: str = Field(PUBLISHED_SETUP, description="the setting the figure was measured in")


PUBLISHED_SOURCE = ("published figures: Harness-S, AppWorld, 4B; effective group rate: share of training groups "
                    "with a non-zero advantage; extra rollouts: training rollouts beyond plain GRPO's 2,560, in % "
                    "of them (Harness-S 3,032 rollouts: +18.44%; same-harness rescue: +41.25%)")
PUBLISHED_RESCUE = {
    "none": Published(method="GRPO", effective_group_rate=64.69, extra_rollout_pct=0.0),
    "same": Published(method="same-harness rescue", effective_group_rate=70.94, extra_rollout_pct=41.25),
    "adaptive": Published(method="Harness-S (adaptive router)", effective_group_rate=79.38, extra_rollout_pct=18.44),
}
PUBLISHED_SUITE, PUBLISHED_K = "appworld", 8


def published_for(training: Training) -> tuple[Published | None, str | None]:
    """The published figure of a rescue run's method, only where its suite and settings are the source's;
    else why none is shown."""
    published = PUBLISHED_RESCUE.get(training.method or "")
    if published is None:
        return None, f"no published figure for the {training.method} method"
    record = training.record
    if record is None:
        return None, "no training record to check against the published setup"
    if record.suite != PUBLISHED_SUITE:
        return None, f"trained on {record.suite}, the published figure on AppWorld"
    if record.evaluation.get("k") != PUBLISHED_K:
        return None, f"K = {record.evaluation.get('k')}, the published K = {PUBLISHED_K}"
    if training.method == "adaptive" and not record.evaluation.get("reanchor_every"):
        return None, "the adaptive router was never re-anchored; the published one was"
    return published, None


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
    published_note: str | None = Field(None, description="why no published figure is shown beside this run")


class SeedGroup(BaseModel):
    """Runs of one recipe and method from one base model on the same train tasks that differ only in their
    training seed: the published Avg@k / Pass@k are means over such repeats."""

    label: str
    runs: list[str]
    seeds: list[int | None]
    k: int
    avg_at_k: Interval = Field(description="mean over the seeds of each run's Avg@k, bootstrap interval over seeds")
    pass_at_k: Interval | None = Field(None, description="the same for Pass@k (k > 1)")


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
    seed_groups: list[SeedGroup] = Field(default_factory=list)


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
        published, note = published_for(t)
        out.append(RescueMethodRow(run=r.label, method=t.method or "?", effective_group_rate=rate,
                                   extra_rollout_pct=t.extra_rollout_pct, rollouts=t.rollouts,
                                   published=published, published_note=note))
    return out


def trials_per_task(run: RunRecord) -> int:
    return min((len(ts) for ts in run.by_task.values()), default=1)


def at_k(run: RunRecord) -> tuple[list[float], list[float]]:
    """Per task over its first k trials: the share that succeeded (Avg@k) and whether any did (Pass@k)."""
    k = trials_per_task(run)
    avg, any_ = [], []
    for trials in run.by_task.values():
        wins = [t.reward >= SUCCESS for t in sorted(trials, key=lambda t: t.trial_id)[:k]]
        avg.append(sum(wins) / k)
        any_.append(float(any(wins)))
    return avg, any_


def scores(run: RunRecord, seed: int) -> dict[str, Interval]:
    out = {"pass_at_1": bootstrap(list(run.success().values()), seed=seed)}
    if trials_per_task(run) > 1:
        avg, any_ = at_k(run)
        out["avg_at_k"], out["pass_at_k"] = bootstrap(avg, seed=seed), bootstrap(any_, seed=seed)
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
    training = label.training
    record = training.record if training else None
    return Cost(
        student_calls=sum(t.turns for t in run.trials), student_tokens=tokens.get("student", {}),
        reviewer_calls=run.results.reviewer_calls, reviewer_tokens=tokens.get("reviewer", {}),
        cost_usd=run.results.cost_usd, wall_time_s=run.results.wall_time_s, trial_wall_s=run.results.trial_wall_s,
        student_rollouts=len(run.trials), training_method=training.method if training else None,
        training_steps=record.cost.optimiser_steps if record else training.steps if training else None,
        rollouts=record.cost.rollouts.total if record else training.rollouts if training else None,
        training_wall_s=record.cost.wall_s if record else training.wall_s if training else None,
        training=record.cost if record else None,
    )


def _base_of(record: TrainingRecord) -> set[str]:
    return {record.base_model, f"hf:{record.base_model}", record.base_model_path, f"hf:{record.base_model_path}"}


def row_marks(runs: list[RunRecord], labels: list[RunLabel], base: RunRecord) -> list[list[str]]:
    """Per run, what makes it unlike the baseline: a training that moved no weight, another base model,
    other train tasks than the first trained run's, other evaluation settings."""
    base_label = labels[runs.index(base)]
    settings = {r.name: evaluation_settings(r.config) for r in runs}
    trained = [lab.training.record for lab in labels if lab.training and lab.training.record]
    first_tasks = trained[0].train_tasks if trained else None
    out = []
    for run, lab in zip(runs, labels, strict=True):
        marks = []
        record = lab.training.record if lab.training else None
        if record is not None and not record.trained:
            marks.append(f"not trained: {record.not_trained_reason}")
        if lab.model != base_label.model:
            marks.append(f"other base model ({lab.model}; baseline {base_label.model})")
        if record is not None and lab.model not in _base_of(record):
            marks.append(f"adapter trained on {record.base_model}, evaluated on {lab.model}")
        if record is not None and first_tasks is not None and record.train_tasks != first_tasks:
            marks.append(f"other train tasks ({len(record.train_tasks)} vs {len(first_tasks)})")
        differ = [f"{k} {settings[run.name][k]!r} vs {settings[base.name][k]!r}" for k in settings[run.name]
                  if settings[run.name][k] != settings[base.name].get(k)]
        if differ:
            marks.append("other evaluation: " + ", ".join(differ))
        out.append(marks)
    return out


def default_baseline(runs: list[RunRecord], labels: list[RunLabel]) -> RunRecord:
    """The base model itself under h: the base model the trained runs were trained from, where one such run
    is given; else the first run."""
    bases = {m for lab in labels if lab.training and lab.training.record for m in _base_of(lab.training.record)}
    for run, lab in zip(runs, labels, strict=True):
        if lab.kind == "base" and lab.harness == "h" and not lab.reviewer and (not bases or lab.model in bases):
            return run
    return runs[0]


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
    if len(base_h) > 1:  # the base model itself beside a recorded student: the pair under h and h* is one student's
        models = {r.name: lab.model for r, lab in plain}
        paired_h = [r for r in base_h if any(models[r.name] == models[s.name] for s in base_hstar)]
        if len(paired_h) != 1:  # recorded students (a file each): set aside the trained models' own base rows
            trained = {f"hf:{lab.training.record.base_model}" for _, lab in plain
                       if lab.training and lab.training.record}
            paired_h = [r for r in base_h if models[r.name] not in trained]
        base_h = paired_h if len(paired_h) == 1 else base_h
        if len(base_hstar) > 1:
            base_hstar = [s for s in base_hstar if any(models[s.name] == models[r.name] for r in base_h)]
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
    labels = [r.label() for r in runs]
    base = default_baseline(runs, labels)
    if baseline is not None:
        named = next((r for r in runs if r.path.resolve() == Path(baseline).resolve()), None)
        if named is None:
            raise UnscaffoldError(f"--baseline {baseline}: not one of the compared runs")
        base = named
    names = unique_labels(labels, runs)
    reference = base.success()
    marks = row_marks(runs, labels, base)
    ranked = [not (lab.training and not lab.training.trained) for lab in labels]
    rows = [RunRow(run=r.name, label=name, what=lab, student=r.results.student, n_tasks=len(r.tasks()),
                   n_trials=len(r.trials), k=trials_per_task(r), scores=scores(r, seed),
                   vs_baseline=None if r is base or not rank else paired(r.success(), reference, seed=seed),
                   cost=cost(r, lab), marks=mark, ranked=rank)
            for r, lab, name, mark, rank in zip(runs, labels, names, marks, ranked, strict=True)]
    tables, note = add_recovery(runs, labels, rule=rule, min_eligible=min_eligible, bank=bank, taught=taught)
    return Comparison(suite=base.results.suite, split=base.results.split, n_tasks=len(base.tasks()),
                      baseline=base.name, seed=seed, runs=rows, recovery=tables, recovery_note=note,
                      rescue_methods=rescue_methods(rows), ablation=ablation(rows, base.results.suite),
                      seed_groups=seed_groups(runs, labels, seed))


def seed_groups(runs: list[RunRecord], labels: list[RunLabel], seed: int) -> list[SeedGroup]:
    """Trained runs alike in all but their training seed (same label, method, base model, train tasks and
    evaluation settings), two or more: Avg@k and Pass@k averaged over the seeds with an interval."""
    groups: dict[str, list[tuple[RunRecord, RunLabel]]] = defaultdict(list)
    for run, lab in zip(runs, labels, strict=True):
        record = lab.training.record if lab.training else None
        if record is None or not record.trained:
            continue
        key = repr((lab.text, record.recipe, record.method, record.base_model, record.train_tasks,
                    sorted(evaluation_settings(run.config).items())))
        groups[key].append((run, lab))
    out = []
    for members in groups.values():
        seeds = [lab.training.record.seed for _, lab in members if lab.training and lab.training.record]
        if len(members) < 2 or len(set(seeds)) < len(seeds):
            continue
        k = min(trials_per_task(r) for r, _ in members)
        per_run = [at_k(r) for r, _ in members]
        avg = [sum(a) / len(a) for a, _ in per_run]
        label = members[0][1]
        method = f" ({label.training.method})" if label.training and label.training.method else ""
        out.append(SeedGroup(label=label.text + method, runs=[r.name for r, _ in members], seeds=seeds, k=k,
                             avg_at_k=bootstrap(avg, seed=seed),
                             pass_at_k=bootstrap([sum(p) / len(p) for _, p in per_run], seed=seed) if k > 1
                             else None))
    return out
