"""What the training rows taught: every h* behaviour counted over the SFT rows with the recovery table's own
detectors. A behaviour no row shows was never taught, so its missing recovery is not a failure to learn."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from unscaffold.behaviors.detector import read_trial
from unscaffold.behaviors.runs import RunRecord, load_run
from unscaffold.detector_spec import DetectorSpec
from unscaffold.errors import InputError


class SftRowRef(BaseModel):
    """The fields of a build-sft row that name the collected trial it came from."""

    task_id: str
    trial_id: str


class SftReportRuns(BaseModel):
    runs: list[Path] = Field(description="the collection runs the rows were built from")


class Taught(BaseModel):
    data: str = Field(description="the SFT rows counted")
    rows: int
    counts: dict[str, int] = Field(description="component id -> rows whose trial shows its behaviour")


def report_path(data: Path) -> Path:
    """build-sft writes `NAME.report.json` beside `NAME.jsonl`."""
    return data.with_name(data.name.removesuffix(".jsonl") + ".report.json")


def read_rows(data: Path) -> list[SftRowRef]:
    if not data.is_file():
        raise InputError(str(data), None, "SFT rows not found")
    rows = []
    for n, line in enumerate(data.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(SftRowRef.model_validate_json(line))
        except ValidationError as e:
            field = ".".join(map(str, e.errors()[0]["loc"])) or None
            raise InputError(f"{data}:{n}", field, "not a build-sft row (needs task_id and trial_id)") from None
    return rows


def source_runs(data: Path) -> list[RunRecord]:
    report = report_path(data)
    if not report.is_file():
        raise InputError(str(report), None, "build-sft report not found beside the rows")
    try:
        runs = SftReportRuns.model_validate(json.loads(report.read_text(encoding="utf-8"))).runs
    except (ValueError, ValidationError):
        raise InputError(str(report), "runs", "expected a list of run folders") from None
    # a relative run was named from where build-sft ran: from here, or else beside the rows
    return [load_run(r if r.is_absolute() or r.is_dir() else data.parent / r) for r in runs]


def taught_counts(data: Path, detectors: dict[str, DetectorSpec]) -> Taught:
    """Each row is traced to its collected trial, whose trajectory holds exactly the steps the row trains on
    (the reviewer's replacements in place of the replaced proposals)."""
    rows = read_rows(data)
    trials = {t.trial_id: (run, t) for run in source_runs(data) for t in run.trials}
    counts = dict.fromkeys(detectors, 0)
    for n, row in enumerate(rows, 1):
        if row.trial_id not in trials:
            raise InputError(f"{data}:{n}", "trial_id", f"{row.trial_id!r} is in none of the report's runs")
        run, trial = trials[row.trial_id]
        traj = run.trajectory(trial)
        if traj is None:
            raise InputError(f"{data}:{n}", "trial_id", f"{row.trial_id!r} has no trajectory in {run.name}")
        reading = read_trial(detectors, traj, run.evidence(trial))
        for component in detectors:
            counts[component] += reading.shows[component]
    return Taught(data=str(data), rows=len(rows), counts=counts)
