"""What a suite is: tasks, a workspace set-up, a reference solution and a scorer."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from unscaffold.minimal_harness.sandbox.base import Sandbox, SandboxConfig, SandboxKind
from unscaffold.minimal_harness.trajectory import Trajectory


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
    outcome: str | None = None


class Suite(ABC):
    """A family of tasks. Subclasses vary the data; the runner, harness and scoring flow are shared."""

    name: ClassVar[str]

    def __init__(self, data: Path | None = None) -> None:
        self.data = Path(data) if data else None

    @abstractmethod
    def tasks(self, split: str | None = None) -> list[Task]:
        """The tasks of a split (None: the suite's default)."""

    @abstractmethod
    def prepare(self, task: Task, trial_dir: Path, kind: SandboxKind, *, oracle: bool = False) -> SandboxConfig:
        """Create the trial's workspace and say how the sandbox shows it."""

    @abstractmethod
    def oracle_commands(self, task: Task) -> list[str]:
        """Commands that carry out the reference solution through `execute`."""

    @abstractmethod
    def score(self, task: Task, trial_dir: Path, sandbox: Sandbox, trajectory: Trajectory) -> Score:
        """Reward in [0, 1], once the student is done; `sandbox` is the trial's, still open (Harbor
        verifiers run in it). Never raises on a bad output: a missing or corrupt one scores 0 with a reason."""

    def metrics(self, tasks: list[Task], rewards: dict[str, float]) -> dict[str, float]:
        """Suite metrics beyond pass@1 (e.g. SGC over scenarios)."""
        return {}

    def describe(self) -> dict[str, str]:
        """Facts about the suite's set-up that belong in results.json (e.g. a library version)."""
        return {}

    def leak_markers(self) -> list[str]:
        """Strings K must never contain: task ids and gold answers (the K lint checks them)."""
        return sorted({t.id for split in self.splits() for t in self.tasks(split)})

    def splits(self) -> list[str | None]:
        return [None]

    def bank_path(self) -> Path | None:
        """The suite's own h* bank (`--harness hstar`), if it ships one."""
        return None

    def k_path(self) -> Path | None:
        """The suite's compiled K (the default `--knowledge`), if it ships one."""
        return None
