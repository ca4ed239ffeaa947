"""What every evolution sets up once: the run folder (checked on resume), the train tasks, the leak
markers, the evaluator and the two model steps. Test tasks are never loaded."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from unscaffold.benchmarks import Suite, Task, load_suite
from unscaffold.benchmarks.splits import FORBIDDEN_SPLIT, refuse_test_tasks
from unscaffold.errors import InputError, UnscaffoldError
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
from unscaffold.knowledge.compiler import compile_k

CONFIG = "config.json"
REPORT = "rounds.json"


def check_out_dir(config: EvolveConfig) -> None:
    """DIR holds one evolution: resuming it with other settings would mix rounds of two."""
    path = config.out / CONFIG
    mine = config.identity()
    theirs = read_json(path).get("identity", {}) if path.exists() else mine
    changed = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
    if changed:
        raise InputError(str(path), changed[0], f"the evolution in {config.out} was started with other settings "
                         f"({', '.join(changed)}); use another --out")
    write_json_atomic(path, {"identity": mine, "config": config.model_dump(mode="json")})


def train_tasks(suite: Suite, config: EvolveConfig) -> list[Task]:
    if config.split == FORBIDDEN_SPLIT:
        raise InputError("--split", None, "evolution learns from train tasks; test tasks never feed it")
    if config.split not in suite.splits():
        raise InputError("--split", None, f"suite {config.suite!r} has no {config.split!r} split "
                         f"(splits: {', '.join(str(s) for s in suite.splits())})")
    by_id = {t.id: t for t in suite.tasks(config.split)}
    wanted = list(dict.fromkeys(config.task_ids or by_id))
    unknown = [t for t in wanted if t not in by_id]
    if unknown:
        raise InputError("--tasks", None, f"{unknown[0]!r} is not a task of the {config.split} split")
    if not wanted:
        raise InputError("--split", None, "no tasks selected")
    refuse_test_tasks(((t, by_id[t].split) for t in wanted), "--tasks", "evolution")
    return sorted((by_id[t] for t in wanted), key=lambda t: t.id)


def check_base(config: EvolveConfig) -> None:
    """Every edit must leave a bank compile-k accepts, so the base must already be one."""
    with tempfile.TemporaryDirectory(prefix="unscaffold-evolve-base-") as tmp:
        try:
            compile_k(config.base, Path(tmp) / "k", sandbox=config.sandbox, verify=True)
        except UnscaffoldError as e:
            raise InputError("--base", None, f"compile-k refuses the base bank: {e}") from None


class Session:
    def __init__(self, config: EvolveConfig, progress: Callable[[str], None] = lambda _: None) -> None:
        self.config, self.out = config, config.out
        load_bank(config.base)  # a bad base fails before anything runs
        progress("checking the base bank")
        with load_suite(config.suite, config.data, config.split_file) as suite:  # trials load their own
            self.tasks = train_tasks(suite, config)
            self.task_ids = [t.id for t in self.tasks]
            config.out.mkdir(parents=True, exist_ok=True)
            check_out_dir(config)
            ids, gold = suite_markers(suite, self.tasks)
            self.markers = Markers(task_ids=ids, gold=gold, task_files=task_file_names(suite, self.tasks))
        check_base(config)
        self.evaluator = Evaluator(config, progress)
        self.steps = Steps(config, self.markers, progress)
        self.banks = config.out / "banks"
        self.report = EvolveReport(mode=config.mode, protocol=config.protocol, suite=config.suite,
                                    split=config.split, tasks=len(self.tasks))

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
