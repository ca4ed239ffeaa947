"""The behaviour-recovery table (Harness-Zero): did the behaviours h* taught move into the weights?

For each detector of the h* bank, a task is eligible when the base model shows the behaviour under h*
and not under h; the rate is the share of eligible tasks where the tuned model shows it under h.
Behaviours with fewer eligible tasks than the minimum are dropped (listed with their counts). With
several trials per task, a task shows a behaviour when `any` of its trials does, or the `majority`.
A task without a completed trial in one of the three runs (every trial lost to the infrastructure or
the environment) says nothing about the behaviour: it is excluded from every behaviour and counted
apart, never taken as "not shown". Several suites give one table each and the pooled mean over all
their kept behaviours, the figure the published 82.3% (28 behaviours over three domains) is."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from unscaffold.behaviors.detector import read_trial
from unscaffold.behaviors.runs import RunRecord, check_comparable
from unscaffold.behaviors.taught import Taught
from unscaffold.detector_spec import DetectorSpec
from unscaffold.errors import UnscaffoldError
from unscaffold.knowledge.bank import load_bank
from unscaffold.knowledge.hstar import bank_for_harness
from unscaffold.outcomes import ERROR_OUTCOMES, Outcome
from unscaffold.run.folder import RunFolder, TrialFolder
from unscaffold.run.models import TrialResult
from unscaffold.suites import find

Rule = Literal["any", "majority"]
RULES: dict[str, str] = {
    "any": "a task shows a behaviour when any of its trials does",
    "majority": "a task shows a behaviour when more than half of its trials do",
}
Shows = dict[str, set[str]]  # component id -> tasks that show its behaviour


# Outcomes of a trial that did not complete: the trajectory says nothing about the student's behaviour.
# A verifier_error trial did complete (only its scoring failed), so its behaviour counts.
NOT_COMPLETED = frozenset(ERROR_OUTCOMES) - {Outcome.VERIFIER_ERROR}


class PublishedFigure(BaseModel):
    """The published figure is a mean over behaviours pooled across three domains: it is compared with
    the pooled mean of several suites only, never with one suite's mean."""

    mean: float = 82.3
    behaviors: int = 28
    per_domain: dict[str, int] = Field(default_factory=lambda: {"SpreadsheetBench": 18, "USPTO": 6, "AppWorld": 4})
    source: str = ("Harness-Zero, behaviour recovery of distilled Qwen3.5-9B + h, 28 behaviours: "
                   "18 SpreadsheetBench, 6 USPTO, 4 AppWorld")


class BehaviorRow(BaseModel):
    component: str
    behavior: str
    components: list[str] = Field(default_factory=list, description="every component sharing this detector (one "
                                  "behaviour); `component` is the first")
    decided_by: dict[str, int] = Field(default_factory=dict, description="evidence|text -> trials of the three runs "
                                       "that kind of reading decided")
    eligible: int
    recovered: int
    rate: float | None = Field(description="percent of eligible tasks; None when none is eligible")
    shown: dict[str, int] = Field(description="tasks showing it per run: base_h, base_hstar, tuned")
    eligible_tasks: list[str]
    recovered_tasks: list[str]
    taught: int | None = Field(None, description="training rows that show the behaviour (None: rows not given); "
                               "0 means never taught, so not recovering it is no failure to learn")


class RecoveryTable(BaseModel):
    suite: str
    split: str | None
    n_tasks: int
    rule: Rule
    rule_text: str
    min_eligible: int
    bank: str
    runs: dict[str, str]
    behaviors: list[BehaviorRow]
    dropped: list[BehaviorRow]
    mean: float | None = Field(description="mean rate over this suite's kept behaviours, percent")
    excluded: list[str] = Field(default_factory=list, description="tasks without a completed trial in some run, "
                                "left out of every behaviour")
    excluded_by_run: dict[str, list[str]] = Field(default_factory=dict, description="role -> its tasks without a "
                                                  "completed trial")
    notes: list[str] = Field(default_factory=list)
    taught: Taught | None = Field(None, description="the tuned model's training rows, counted per behaviour")


class PooledRecovery(BaseModel):
    """Several suites: each one's table, and the mean over every kept behaviour of all of them."""

    suites: list[RecoveryTable]
    suite_means: dict[str, float | None]
    behaviors: int = Field(description="kept behaviours over all suites")
    mean: float | None = Field(description="pooled mean rate over all kept behaviours, percent")
    excluded: int = Field(description="tasks excluded (no completed trial) over all suites")
    published: PublishedFigure = Field(default_factory=PublishedFigure)


def completed(trial: TrialResult) -> bool:
    return not trial.infra_error and trial.outcome not in NOT_COMPLETED


def pooled(tables: list[RecoveryTable]) -> PooledRecovery:
    rates = [r.rate for t in tables for r in t.behaviors if r.rate is not None]
    return PooledRecovery(suites=tables, suite_means={t.suite: t.mean for t in tables},
                          behaviors=sum(len(t.behaviors) for t in tables),
                          mean=round(sum(rates) / len(rates), 4) if rates else None,
                          excluded=sum(len(t.excluded) for t in tables))


class RunReading(BaseModel):
    """Every detector on every completed trial of one run: the tasks showing each behaviour, how many trials
    each kind of reading decided, and what could not be read (trial id: why)."""

    shows: Shows
    kinds: dict[str, dict[str, int]] = Field(description="component -> evidence|text -> trials it decided")
    notes: list[str] = Field(default_factory=list)


def task_shows(run: RunRecord, detectors: dict[str, DetectorSpec], rule: Rule) -> RunReading:
    """Run every detector on every completed trial of the run once; trials that did not complete (lost to
    the infrastructure or the environment, or without a trajectory) do not vote. Each trial is read within
    a time bound; one the analysis cannot read shows what was decided before, and is noted."""
    votes: dict[str, dict[str, list[bool]]] = {c: {} for c in detectors}
    kinds: dict[str, Counter[str]] = {c: Counter() for c in detectors}
    notes: list[str] = []
    for task, trials in run.by_task.items():
        for component in detectors:
            votes[component][task] = []
        for trial in trials:
            if not completed(trial):
                continue
            try:
                traj = run.trajectory(trial)
            except (UnscaffoldError, ValueError, RecursionError, OSError) as e:  # one unreadable trial, not the table
                votes_none(votes, task, notes, trial.trial_id, f"trajectory not read ({first_line(e)}); counted as "
                           "showing no behaviour")
                continue
            if traj is None:
                continue
            try:
                evidence = run.evidence(trial)
            except (UnscaffoldError, ValueError, RecursionError, OSError) as e:
                notes.append(f"{trial.trial_id}: {TrialFolder.EVIDENCE} not read ({first_line(e)}); read from the text")
                evidence = None
            reading = read_trial(detectors, traj, evidence)
            for component in detectors:
                votes[component][task].append(reading.shows[component])
                kinds[component][reading.kinds[component]] += 1
            notes += [f"{trial.trial_id}: {n}" for n in reading.notes]
    shows = {c: {task for task, v in by_task.items() if v and (any(v) if rule == "any" else 2 * sum(v) > len(v))}
             for c, by_task in votes.items()}
    return RunReading(shows=shows, kinds={c: dict(k) for c, k in kinds.items()}, notes=notes)


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:200]}" if text else type(error).__name__


def votes_none(votes: dict[str, dict[str, list[bool]]], task: str, notes: list[str], trial_id: str, why: str) -> None:
    """A completed trial whose trajectory cannot be read votes "not shown" for every behaviour, and is noted."""
    for by_task in votes.values():
        by_task[task].append(False)
    notes.append(f"{trial_id}: {why}")


def behaviours(detectors: dict[str, DetectorSpec]) -> dict[str, list[str]]:
    """First component id -> every component with the same detector (same predicate and parameters, or the
    same patterns): components that share a detector are one behaviour, one row, counted once in the mean."""
    groups: dict[str, list[str]] = {}
    for component, spec in detectors.items():
        key = spec.model_dump_json(exclude={"description"})
        groups.setdefault(key, []).append(component)
    return {ids[0]: ids for ids in groups.values()}


def without_completed_trial(run: RunRecord) -> set[str]:
    return {task for task, trials in run.by_task.items()
            if not any(completed(t) and run.trial_folder(t.trial_id).trajectory.exists()
                       for t in trials)}


def check_roles(base_h: RunRecord, base_hstar: RunRecord, tuned: list[RunRecord]) -> list[str]:
    """Each run must be what its role says; returns notes for what is allowed but worth knowing."""
    check_comparable([base_h, base_hstar, *tuned])
    for flag, run in (("--base-h", base_h), ("--base-hstar", base_hstar), *(("--tuned", t) for t in tuned)):
        if run.results.reviewer:
            raise UnscaffoldError(f"{flag} {run.name}: a reviewed collection (reviewer {run.results.reviewer}); "
                                  "behaviour recovery reads evaluations without a reviewer")
        hstar = flag == "--base-hstar"
        if (run.results.harness == "minimal") == hstar:
            wanted = "an h* harness (--harness hstar or a bank)" if hstar else "the minimal harness h"
            raise UnscaffoldError(f"{flag} {run.name}: ran under harness {run.results.harness!r}; "
                                  f"this role needs {wanted}")
    notes = []
    if base_h.results.student != base_hstar.results.student:
        notes.append(f"the base runs have different students ({base_h.results.student} under h, "
                     f"{base_hstar.results.student} under h*)")
    return notes


def bank_detectors(base_hstar: RunRecord, bank: Path | None = None) -> tuple[Path, dict[str, DetectorSpec]]:
    """The detectors of the bank the base + h* run ran with (or `bank`, when given)."""
    if bank is None:
        harness = base_hstar.results.harness
        suite_bank = find(base_hstar.config.suite, base_hstar.name, "suite").bank \
            if harness == "hstar" else None
        bank = bank_for_harness(harness, suite_bank)
        if not (bank / "manifest.toml").is_file():
            raise UnscaffoldError(f"{base_hstar.name}: its h* bank {str(bank)!r} ({RunFolder.CONFIG} harness) is not "
                                  "found from here; pass --bank")
    detectors = load_bank(bank).detectors()
    if not detectors:
        raise UnscaffoldError(f"{bank}: the bank declares no behaviour detectors")
    return bank, detectors


def recovery_table(base_h: RunRecord, base_hstar: RunRecord, tuned: RunRecord, *, rule: Rule = "any",
                   min_eligible: int = 10, bank: Path | None = None, notes: list[str] | None = None,
                   cache: dict[str, RunReading] | None = None, taught: Taught | None = None) -> RecoveryTable:
    """`cache` (run path -> shows) lets a comparison reuse the base runs' detections across tuned runs;
    `taught` (the tuned model's training rows, counted with the same detectors) tells "never taught" apart."""
    notes = list(notes if notes is not None else check_roles(base_h, base_hstar, [tuned]))
    bank_path, detectors = bank_detectors(base_hstar, bank)
    cache = cache if cache is not None else {}
    shows, readings = {}, {}
    for role, run in (("base_h", base_h), ("base_hstar", base_hstar), ("tuned", tuned)):
        if run.name not in cache:
            cache[run.name] = task_shows(run, detectors, rule)
        readings[role] = cache[run.name]
        shows[role] = readings[role].shows
    for role, reading in readings.items():
        if reading.notes:
            more = f" (and {len(reading.notes) - 3} more)" if len(reading.notes) > 3 else ""
            notes.append(f"{role}: {len(reading.notes)} thing(s) the detectors could not read, counted as not "
                         f"shown: {'; '.join(reading.notes[:3])}{more}")
    missing = {role: sorted(without_completed_trial(run)) for role, run in
               (("base_h", base_h), ("base_hstar", base_hstar), ("tuned", tuned))}
    excluded = set().union(*map(set, missing.values()))
    kept: list[BehaviorRow] = []
    dropped: list[BehaviorRow] = []
    for component, same in behaviours(detectors).items():
        spec = detectors[component]
        eligible = sorted(shows["base_hstar"][component] - shows["base_h"][component] - excluded)
        recovered = sorted(set(eligible) & shows["tuned"][component])
        decided = sum((Counter(r.kinds[component]) for r in readings.values()), Counter())
        row = BehaviorRow(component=component, behavior=spec.description, components=same,
                          decided_by=dict(sorted(decided.items())), eligible=len(eligible),
                          recovered=len(recovered),
                          rate=round(100.0 * len(recovered) / len(eligible), 4) if eligible else None,
                          shown={role: len(s[component] - excluded) for role, s in shows.items()},
                          eligible_tasks=eligible, recovered_tasks=recovered,
                          taught=taught.counts.get(component, 0) if taught else None)
        (kept if len(eligible) >= min_eligible else dropped).append(row)
    rates = [r.rate for r in kept if r.rate is not None]
    counts = sorted({len(ts) for r in (base_h, base_hstar, tuned) for ts in r.by_task.values()})
    if counts != [1]:
        notes.append(f"trials per task: {', '.join(map(str, counts))} ({RULES[rule]})")
    return RecoveryTable(
        suite=base_h.results.suite, split=base_h.results.split, n_tasks=len(base_h.tasks()), rule=rule,
        rule_text=RULES[rule], min_eligible=min_eligible, bank=str(bank_path),
        runs={"base_h": base_h.name, "base_hstar": base_hstar.name, "tuned": tuned.name},
        behaviors=kept, dropped=dropped, mean=round(sum(rates) / len(rates), 4) if rates else None,
        excluded=sorted(excluded), excluded_by_run={role: tasks for role, tasks in missing.items() if tasks},
        notes=notes, taught=taught)


def by_suite(base_h: list[RunRecord], base_hstar: list[RunRecord],
             tuned: list[RunRecord]) -> list[tuple[RunRecord, RunRecord, RunRecord]]:
    """The runs of each role matched by suite: one run of each role per suite, in the order of --base-h."""
    roles = {"--base-h": base_h, "--base-hstar": base_hstar, "--tuned": tuned}
    suites: dict[str, dict[str, RunRecord]] = {}
    for flag, runs in roles.items():
        for run in runs:
            named = suites.setdefault(run.results.suite, {})
            if flag in named:
                raise UnscaffoldError(f"{flag} {run.name}: a second run of suite {run.results.suite!r} "
                                      f"(the first is {named[flag].name}); give one run per role per suite")
            named[flag] = run
    for suite, named in suites.items():
        lacking = [flag for flag in roles if flag not in named]
        if lacking:
            raise UnscaffoldError(f"suite {suite!r}: no {' or '.join(lacking)} run; every suite needs one run of "
                                  "each role")
    return [(named["--base-h"], named["--base-hstar"], named["--tuned"]) for named in suites.values()]
