"""Reading finished run folders for the behaviour table and the comparison, and refusing mixes that
would compare unlike with unlike (other suites or splits, tasks missing from a run)."""

from __future__ import annotations

from collections import defaultdict
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unscaffold.behaviors.labels import RunLabel, label_run
from unscaffold.errors import InputError, UnscaffoldError
from unscaffold.iojson import validation_error
from unscaffold.minimal_harness.evidence import CommandEvidence
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.run.aggregate import SUCCESS
from unscaffold.run.folder import RunFolder, TrialFolder
from unscaffold.run.models import RunConfig, RunResults, TrialResult


class RunRecord(BaseModel):
    """One finished run: its config, its summary and every trial's result."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    path: Path
    config: RunConfig
    raw_config: dict[str, Any] = Field(description=f"{RunFolder.CONFIG} as written, with fields newer than RunConfig")
    results: RunResults
    trials: list[TrialResult]
    trial_dirs: dict[str, Path] = Field(default_factory=dict, description="trial id -> its folder (a routed run "
                                        f"keeps its trials in {RunFolder.BY_HARNESS}/NAME/{RunFolder.TRIALS})")

    @property
    def name(self) -> str:
        return str(self.path)

    @cached_property
    def by_task(self) -> dict[str, list[TrialResult]]:
        out: dict[str, list[TrialResult]] = defaultdict(list)
        for t in self.trials:
            out[t.task_id].append(t)
        return dict(out)

    def tasks(self) -> set[str]:
        return set(self.by_task)

    def success(self) -> dict[str, float]:
        """Task id -> share of its trials that succeeded (pass@1 per task, as results.json counts it)."""
        return {task: sum(t.reward >= SUCCESS for t in ts) / len(ts) for task, ts in self.by_task.items()}

    def label(self) -> RunLabel:
        return label_run(self.path, self.raw_config)

    def trajectory(self, trial: TrialResult) -> Trajectory | None:
        return self.trial_folder(trial.trial_id).read_trajectory()

    def evidence(self, trial: TrialResult) -> list[CommandEvidence] | None:
        """What the trial's commands were recorded doing (None: recorded without evidence)."""
        return self.trial_folder(trial.trial_id).read_evidence()

    def trial_folder(self, trial_id: str) -> TrialFolder:
        found = self.trial_dirs.get(trial_id)
        return TrialFolder(found) if found else RunFolder(self.path).trial(trial_id)


def load_run(path: Path) -> RunRecord:
    path = Path(path)
    folder = RunFolder(path)
    if not path.is_dir():
        raise InputError(str(path), None, "run folder not found")
    if not folder.results.exists():
        raise InputError(str(path), None, f"no {folder.RESULTS}: not a finished run (re-running its command "
                         "resumes it)")
    results = folder.read_results()
    routed = folder.routed()
    parts = folder.parts() if routed else [folder]
    if not parts:
        raise InputError(str(path), None, f"a routed run without {folder.BY_HARNESS}/NAME runs")
    raw = parts[0].read_raw_config()
    if routed:  # the run as a whole: its harness is the route, each part names the router that chose it
        raw = {**raw, "out": str(path), "harness": results.harness, "task_ids": None}
    try:
        config = RunConfig.model_validate(raw)
    except ValidationError as e:
        raise validation_error(str(parts[0].config), e) from None
    found = [trial for part in parts for trial in part.finished_trials()]
    trials = [trial.read_result() for trial in found]
    if not trials:
        raise InputError(str(path), None, f"no trial results under {folder.TRIALS}/")
    dirs = {t.trial_id: trial.root for t, trial in zip(trials, found, strict=True)} if routed else {}
    return RunRecord(path=path, config=config, raw_config=raw, results=results, trials=trials, trial_dirs=dirs)


def check_comparable(runs: list[RunRecord]) -> None:
    """Same suite, same split (where both name one) and the same tasks; else one line naming the run."""
    first = runs[0]
    for run in runs[1:]:
        if run.results.suite != first.results.suite:
            raise UnscaffoldError(f"{run.name}: suite {run.results.suite!r} differs from {first.name} "
                                  f"({first.results.suite!r}); compare runs of one suite")
        if run.results.split and first.results.split and run.results.split != first.results.split:
            raise UnscaffoldError(f"{run.name}: split {run.results.split!r} differs from {first.name} "
                                  f"({first.results.split!r}); compare runs of one split")
    union = set().union(*(r.tasks() for r in runs))
    for run in runs:
        missing = sorted(union - run.tasks())
        if missing:
            shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
            raise UnscaffoldError(f"{run.name}: missing {len(missing)} task(s) the other runs have ({shown}); "
                                  "compare runs over the same tasks")
