"""What a suite is: tasks, a workspace set-up, a reference solution and a scorer."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, Field

from unscaffold.benchmarks.splits import SPLIT_NAMES, SplitFile, check_known, read_split_file
from unscaffold.errors import InputError
from unscaffold.llm.types import Message
from unscaffold.minimal_harness.sandbox.base import Sandbox, SandboxConfig, SandboxKind
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.outcomes import Outcome
from unscaffold.suites import SuiteEntry, entry_of


class Task(BaseModel):
    id: str
    instruction: str
    split: str | None = None
    scenario: str | None = Field(None, description="Tasks of one scenario pass together or not at all (SGC).")
    network: bool = False
    agent_timeout_s: float | None = None
    meta: dict[str, Any] = Field(default_factory=dict)


class Score(BaseModel):
    reward: float
    reason: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    outcome: Outcome | None = Field(None, description="set when the scorer itself failed (`verifier_error`) or the "
                                "environment did; None: the reward decides (passed or failed)")


APP_WORLD_OUTPUT_CUT = 12_000  # the reference harness's cut of command output in the app world


class Suite(ABC):
    """A family of tasks. Subclasses vary the data; the runner, harness and scoring flow are shared.

    Life cycle, as the runner drives it (and every other user of a suite, through `with`):

    1. `load_suite(name, data)` builds it: reads the data, nothing runs yet.
    2. `tasks` / `named_tasks` choose the tasks; `bank_path`, `k_path` and `leak_markers` serve K.
    3. Per trial, in this order: `prepare` (the workspace and how the sandbox shows it), `services`
       (entered: what must run on the host while the student works and while it is scored), `opening`,
       the episode, `score` (the sandbox still open), then `services` left, crashed or not. A trial
       that stops short of `score` on purpose calls `release` instead.
    4. `close` once the user is done with the suite, also after a failed trial or an interrupted run:
       it releases what trials left behind (bridges, servers, worker processes). `with suite:` calls it.
       It may be called more than once; a closed suite is not used again.
    """

    name: str  # the registry's name for the suite folder the class is in (`suite.toml`), else the class's own
    openings: ClassVar[tuple[str, ...]] = ("plain",)  # how an episode may start (`--opening`); first: default
    # Characters of a command's output the student sees (head and tail past it); None: whole. The reference
    # harness cuts only in the app world (12,000); `--output-cut` overrides it per run.
    output_cut_chars: ClassVar[int | None] = None

    def __init__(self, data: Path | None = None) -> None:
        self.entry: SuiteEntry | None = entry_of(type(self))
        self.name = self.entry.name if self.entry is not None else getattr(self, "name", type(self).__name__)
        self.data = Path(data) if data else None
        self.split_file: SplitFile | None = None
        self.split_file_path: Path | None = None
        self._split_pool: dict[str, Task] = {}

    @abstractmethod
    def tasks(self, split: str | None = None) -> list[Task]:
        """The tasks of a split (None: the suite's default)."""

    def named_tasks(self, task_ids: list[str], split: str | None = None) -> list[Task]:
        """The tasks of a split with these ids (`--tasks`), in the split's order; unknown ids are left out
        (the runner names them). A suite whose tasks are costly to make makes only these."""
        wanted = set(task_ids)
        return [t for t in self.tasks(split) if t.id in wanted]

    def data_tasks(self, task_ids: set[str]) -> dict[str, Task]:
        """The data's own tasks with these ids, whatever split the data gives them (a split file then
        re-assigns them). A suite whose tasks are costly to make makes only these."""
        return {t.id: t for split in self.splits() for t in self.tasks(split) if t.id in task_ids}

    def use_split_file(self, path: Path) -> None:
        """From now on the splits are the file's (train, validation, test), checked against the data first;
        tasks the file does not list belong to no split."""
        split_file = read_split_file(path)
        listed = set(split_file.split_of())
        pool = self.data_tasks(listed)
        check_known(path, split_file, pool, self.skipped_tasks())
        self._split_pool, self.split_file, self.split_file_path = pool, split_file, Path(path)

    def split_file_tasks(self, split: str | None) -> list[Task]:
        """With a split file: a split's tasks in the file's order (None: every listed task)."""
        assert self.split_file is not None
        if split is not None and split not in SPLIT_NAMES:
            raise InputError("--split", None, f"the split file {self.split_file_path} has the splits "
                             f"{', '.join(SPLIT_NAMES)}, not {split!r}")
        names = [split] if split else list(SPLIT_NAMES)
        return [self._split_pool[t].model_copy(update={"split": name})
                for name in names for t in self.split_file.ids(name)]

    def split_file_splits(self) -> list[str | None]:
        return list(SPLIT_NAMES)

    @abstractmethod
    def prepare(self, task: Task, trial_dir: Path, kind: SandboxKind, *, oracle: bool = False) -> SandboxConfig:
        """Create the trial's workspace and say how the sandbox shows it."""

    def services(self, task: Task, trial_dir: Path) -> AbstractContextManager[None]:
        """What the trial needs running on the host while the student works and while it is scored (e.g. a
        server holding the task's world outside the sandbox). The runner enters it after `prepare` and
        leaves it once the trial is over, crashed or not. Default: nothing."""
        return contextlib.nullcontext()

    def example_workspace(self, workspace: Path) -> AbstractContextManager[None]:
        """For `compile-k` on a bank that names this suite (`example_suite`): make `workspace` ready for a
        tool example, on the host, for as long as the context lasts (each example gets a fresh one).
        Default: nothing to prepare."""
        return contextlib.nullcontext()

    def opening(self, task: Task, trial_dir: Path, style: str) -> list[Message] | None:
        """The messages after the system prompt that start the episode, called once the trial's services
        run; None: the plain start (the task's instruction as the one user message)."""
        return None

    def check_opening(self, style: str | None) -> str:
        """The opening style a run uses (None: the suite's default); one it lacks is refused."""
        if style is None:
            return self.openings[0]
        if style not in self.openings:
            raise InputError("--opening", None, f"suite {self.name!r} starts episodes as "
                             f"{' or '.join(self.openings)}, not {style!r}")
        return style

    @abstractmethod
    def oracle_commands(self, task: Task) -> list[str]:
        """Commands that carry out the reference solution through `execute`."""

    @abstractmethod
    def score(self, task: Task, trial_dir: Path, sandbox: Sandbox, trajectory: Trajectory) -> Score:
        """Reward in [0, 1], once the student is done; `sandbox` is the trial's, still open (Harbor
        verifiers run in it). Never raises on a bad output: a missing or corrupt one scores 0 with a reason."""

    def skipped_tasks(self) -> dict[str, str]:
        """Tasks of the data that could not be read, id -> why; the others still run. Default: none."""
        return {}

    def environment_gaps(self, task: Task, kind: SandboxKind) -> list[str]:
        """What this sandbox kind could not set up of the task's environment (one line each, e.g. a
        Dockerfile `RUN` under `local`). A trial with gaps that then fails is `environment_unsupported`."""
        return []

    def metrics(self, tasks: list[Task], rewards: dict[str, float]) -> dict[str, float]:
        """Suite metrics beyond pass@1 (e.g. SGC over scenarios)."""
        return {}

    def describe(self) -> dict[str, str]:
        """Facts about the suite's set-up that belong in results.json (e.g. a library version)."""
        return {}

    def leak_markers(self, tasks: list[Task] | None = None) -> list[str]:
        """Strings K must never contain: task ids and gold answers (the K lint checks them), of these
        tasks (None: every task)."""
        if tasks is not None:
            return sorted({t.id for t in tasks})
        return sorted({t.id for split in self.splits() for t in self.tasks(split)})

    def splits(self) -> list[str | None]:
        return [None]

    def named_splits(self) -> set[str]:
        """The splits `--split` may name: a suite whose data carries none has none (a split file gives some)."""
        return {s for s in self.splits() if s}

    def environment_notes(self, task: Task, kind: SandboxKind) -> list[str]:
        """Every part of the task's environment the sandbox did not apply, whatever the outcome: the gaps and
        what it only approximated (a Dockerfile's `FROM ubuntu` under `local`). Recorded even when it passes."""
        return self.environment_gaps(task, kind)

    def bank_path(self) -> Path | None:
        """The h* bank the suite's folder declares (`--harness hstar`), if it has one."""
        return self.entry.bank if self.entry is not None else None

    def k_path(self) -> Path | None:
        """The compiled K the suite's folder declares (the default `--knowledge`), if it has one."""
        return self.entry.k if self.entry is not None else None

    def release(self, trial_dir: Path) -> None:
        """A trial that ends without `score` (an opening built for training, say): free what `prepare`
        started for it. Default: nothing to free."""
        return None

    def close(self) -> None:
        """Release whatever trials left running (step 4 of the life cycle). Default: nothing to release."""
        return None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
