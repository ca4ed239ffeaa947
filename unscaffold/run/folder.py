"""The run folder: every path a run writes, and its typed readers and writers, in one place.

The layout is a contract other tools read (docs/run.md); no other module spells one of these
names, so the layout can be read and changed here alone:

    RUN/config.json       the run's `RunConfig` (a routed run has none: each of its parts has one)
    RUN/results.json      the run's `RunResults`, written after its last trial
    RUN/events.jsonl      trial_started / trial_retry / trial_finished / trial_infra_failed, one a line
    RUN/knowledge.json    where the K the reviewer read was ({"path": ...}), when it read one
    RUN/routing.json      a routed run's rankings; its parts are run folders under by-harness/NAME,
                          the pool it routes over is materialised under pool/
    RUN/report.html       `unscaffold report`'s default page
    RUN/.probe/           a workspace the local sandbox is tried in before the trials start, then removed
    RUN/trials/ID/        one folder per trial: result.json (its `TrialResult`, written last: the
                          trial's commit point), trajectory.json, reviews.jsonl, evidence.jsonl and
                          trajectory.atif.json (`export-atif`); the suite may add its own files there."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from unscaffold.errors import InputError
from unscaffold.iojson import append_jsonl, load_model, read_json, write_json_atomic
from unscaffold.minimal_harness.evidence import CommandEvidence, read_evidence
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.run.models import RunConfig, RunResults, TrialResult


@dataclass(frozen=True)
class TrialFolder:
    """`RUN/trials/ID`: what one trial leaves."""

    root: Path

    RESULT: ClassVar[str] = "result.json"
    TRAJECTORY: ClassVar[str] = "trajectory.json"
    REVIEWS: ClassVar[str] = "reviews.jsonl"
    EVIDENCE: ClassVar[str] = "evidence.jsonl"
    ATIF: ClassVar[str] = "trajectory.atif.json"
    NAMES: ClassVar[tuple[str, ...]] = (RESULT, TRAJECTORY, REVIEWS, EVIDENCE, ATIF)

    @property
    def id(self) -> str:
        return self.root.name

    @property
    def result(self) -> Path:
        return self.root / self.RESULT

    @property
    def trajectory(self) -> Path:
        return self.root / self.TRAJECTORY

    @property
    def reviews(self) -> Path:
        return self.root / self.REVIEWS

    @property
    def evidence(self) -> Path:
        return self.root / self.EVIDENCE

    @property
    def atif(self) -> Path:
        return self.root / self.ATIF

    def finished(self) -> bool:
        """Whether the trial reached its commit point (its result.json)."""
        return self.result.exists()

    def read_result(self) -> TrialResult:
        return load_model(self.result, TrialResult)

    def write_result(self, result: TrialResult) -> None:
        write_json_atomic(self.result, result)

    def read_trajectory(self) -> Trajectory | None:
        """The trial's trajectory, or None when it has none (it failed before its first step)."""
        return Trajectory.load(self.trajectory) if self.trajectory.exists() else None

    def read_evidence(self) -> list[CommandEvidence] | None:
        """What the trial's commands were recorded doing (None: recorded without evidence)."""
        return read_evidence(self.evidence)


@dataclass(frozen=True)
class RunFolder:
    """A run folder (`unscaffold run --out`): its paths and its records as their models."""

    root: Path

    CONFIG: ClassVar[str] = "config.json"
    RESULTS: ClassVar[str] = "results.json"
    EVENTS: ClassVar[str] = "events.jsonl"
    KNOWLEDGE: ClassVar[str] = "knowledge.json"
    ROUTING: ClassVar[str] = "routing.json"
    REPORT: ClassVar[str] = "report.html"
    TRIALS: ClassVar[str] = "trials"
    BY_HARNESS: ClassVar[str] = "by-harness"
    POOL: ClassVar[str] = "pool"
    PROBE: ClassVar[str] = ".probe"
    FILES: ClassVar[tuple[str, ...]] = (CONFIG, RESULTS, EVENTS, KNOWLEDGE, ROUTING, REPORT, *TrialFolder.NAMES)
    FOLDERS: ClassVar[tuple[str, ...]] = (TRIALS, BY_HARNESS, POOL, PROBE)

    def __init__(self, root: Path | str) -> None:
        object.__setattr__(self, "root", Path(root))

    @property
    def config(self) -> Path:
        return self.root / self.CONFIG

    @property
    def results(self) -> Path:
        return self.root / self.RESULTS

    @property
    def events(self) -> Path:
        return self.root / self.EVENTS

    @property
    def knowledge(self) -> Path:
        return self.root / self.KNOWLEDGE

    @property
    def routing(self) -> Path:
        return self.root / self.ROUTING

    @property
    def report(self) -> Path:
        return self.root / self.REPORT

    @property
    def trials_dir(self) -> Path:
        return self.root / self.TRIALS

    @property
    def pool_dir(self) -> Path:
        """Where a routed run materialises the pool it routes over."""
        return self.root / self.POOL

    @property
    def probe_dir(self) -> Path:
        """A scratch workspace the sandbox is tried in before any trial starts."""
        return self.root / self.PROBE

    def trial(self, trial_id: str) -> TrialFolder:
        return TrialFolder(self.trials_dir / trial_id)

    def trials(self) -> list[TrialFolder]:
        """Every trial folder, finished or not, in the order of their ids."""
        return [TrialFolder(p) for p in sorted(self.trials_dir.glob("*")) if p.is_dir()]

    def finished_trials(self) -> list[TrialFolder]:
        """Every trial that reached its result.json, in the order of their ids."""
        return [TrialFolder(p.parent) for p in sorted(self.trials_dir.glob(f"*/{TrialFolder.RESULT}"))]

    def review_logs(self) -> list[Path]:
        """Every trial's reviews.jsonl, in the order of the trial ids."""
        return sorted(self.trials_dir.glob(f"*/{TrialFolder.REVIEWS}"))

    def part(self, harness: str) -> RunFolder:
        """A routed run's run folder for the tasks routed to `harness`."""
        return RunFolder(self.root / self.BY_HARNESS / harness)

    def parts(self) -> list[RunFolder]:
        """A routed run's parts that hold a run (their config.json), in the order of their names."""
        return [RunFolder(p) for p in sorted((self.root / self.BY_HARNESS).glob("*")) if RunFolder(p).config.is_file()]

    def routed(self) -> bool:
        """A routed run: its parts hold the configs and the trials, it holds the routing and the summary."""
        return not self.config.exists() and self.routing.exists()

    def read_raw_config(self) -> Any:
        """config.json as written (any version, with fields newer than `RunConfig`)."""
        return read_json(self.config)

    def read_config(self) -> RunConfig:
        return load_model(self.config, RunConfig)

    def write_config(self, config: RunConfig) -> None:
        write_json_atomic(self.config, config.model_dump(mode="json"))

    def read_results(self) -> RunResults:
        return load_model(self.results, RunResults)

    def write_results(self, summary: RunResults | dict[str, Any]) -> None:
        """`summary`: the model, or its JSON form with the extra keys a routed run adds."""
        write_json_atomic(self.results, summary.model_dump(mode="json") if isinstance(summary, RunResults)
                          else summary)

    def read_trial_results(self) -> list[TrialResult]:
        """Every finished trial's result, in the order of their ids."""
        return [t.read_result() for t in self.finished_trials()]

    def append_event(self, event: dict[str, Any]) -> None:
        append_jsonl(self.events, event)

    def write_knowledge(self, k_root: Path) -> None:
        write_json_atomic(self.knowledge, {"path": str(k_root)})

    def read_knowledge(self) -> Path | None:
        """The K folder the run's reviewer read, or None when it read none."""
        if not self.knowledge.exists():
            return None
        data = read_json(self.knowledge)
        path = data.get("path") if isinstance(data, dict) else None
        if not isinstance(path, str):
            raise InputError(str(self.knowledge), "path", "expected the K folder as a string")
        return Path(path)

    def write_routing(self, router: str, rankings: dict[str, list[str]]) -> None:
        write_json_atomic(self.routing, {"router": router, "rankings": rankings})
