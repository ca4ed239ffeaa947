"""What every evolution sets up once: the run folder (checked on resume), the train tasks, the leak
markers, the evaluator and the two model steps. Test tasks are never loaded."""

from __future__ import annotations

from pathlib import Path

from unscaffold.benchmarks import Task, load_suite
from unscaffold.errors import InputError
from unscaffold.evolve.budget import spent
from unscaffold.evolve.config import EvolveConfig
from unscaffold.evolve.evaluate import Evaluator, first
from unscaffold.evolve.failures import Failure, collect_failures
from unscaffold.evolve.guards import Markers, suite_markers, task_file_names
from unscaffold.evolve.patch import copy_bank
from unscaffold.evolve.records import EvolveReport
from unscaffold.evolve.steps import Steps
from unscaffold.iojson import read_json, write_json_atomic
from unscaffold.knowledge.bank import load_bank

CONFIG = "config.json"
REPORT = "rounds.json"


def check_out_dir(config: EvolveConfig) -> None:
    path = config.out / CONFIG
    if path.exists():
        previous = read_json(path)
        mine = config.identity()
        theirs = {k: previous.get(k) for k in mine}
        if theirs != mine:
            diff = sorted(k for k in mine if mine[k] != theirs[k])
            raise InputError(str(path), diff[0], f"the evolution in {config.out} was started with other "
                             f"settings ({', '.join(diff)}); use another --out")
    write_json_atomic(path, config.model_dump(mode="json"))


def train_tasks(config: EvolveConfig) -> list[Task]:
    suite = load_suite(config.suite, config.data)
    if config.split not in suite.splits():
        raise InputError("--split", None, f"suite {config.suite!r} has no {config.split!r} split "
                         f"(splits: {', '.join(str(s) for s in suite.splits())})")
    tasks = suite.tasks(config.split)
    if config.task_ids:
        known = {t.id for t in tasks}
        missing = [t for t in config.task_ids if t not in known]
        if missing:
            raise InputError("--tasks", None, f"{missing[0]!r} is not a task of the {config.split} split")
        tasks = [t for t in tasks if t.id in set(config.task_ids)]
    if not tasks:
        raise InputError("--split", None, "no tasks selected")
    return tasks


class Session:
    def __init__(self, config: EvolveConfig) -> None:
        self.config, self.out = config, config.out
        load_bank(config.base)  # a bad base fails before anything runs
        self.suite = load_suite(config.suite, config.data)
        self.tasks = train_tasks(config)
        self.task_ids = [t.id for t in self.tasks]
        config.out.mkdir(parents=True, exist_ok=True)
        check_out_dir(config)
        ids, gold = suite_markers(self.suite)
        self.markers = Markers(task_ids=ids, gold=gold, task_files=task_file_names(self.suite, self.tasks))
        self.evaluator = Evaluator(config)
        self.steps = Steps(config, self.markers)
        self.banks = config.out / "banks"
        self.report = EvolveReport(mode=config.mode, suite=config.suite, split=config.split, tasks=len(self.tasks))

    def base_bank(self) -> Path:
        base = self.banks / "base"
        if not (base / "manifest.toml").exists():
            staging = self.banks / ".base.staging"
            copy_bank(self.config.base, staging)
            staging.rename(base)
        return base.resolve()

    def measure(self, name: str, bank: Path) -> dict[str, float]:
        """One sample per train task under `bank` (run folder `runs/<name>`)."""
        return first(self.evaluator.evaluate(name, bank, self.task_ids))

    def measure_child(self, name: str, bank: Path, targeted: list[str]) -> tuple[dict[str, float], list[str]]:
        """The tasks the edit targeted first, then the rest of the train split (to count regressions)."""
        rest = [t for t in self.task_ids if t not in set(targeted)]
        after = first(self.evaluator.evaluate(f"{name}-targeted", bank, targeted))
        after.update(first(self.evaluator.evaluate(f"{name}-rest", bank, rest)))
        return after, [n for n, ids in ((f"{name}-targeted", targeted), (f"{name}-rest", rest)) if ids]

    def failures(self, run_names: list[str], rewards: dict[str, float]) -> dict[str, Failure]:
        return collect_failures([self.evaluator.run_dir(n) for n in run_names], rewards)

    def save(self) -> None:
        s = spent(self.out, self.config.budget)
        self.report.calls, self.report.tokens, self.report.usd = s.calls, s.tokens, round(s.usd, 6)
        write_json_atomic(self.out / REPORT, self.report.model_dump(mode="json"))
