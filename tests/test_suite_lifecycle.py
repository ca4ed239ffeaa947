"""A suite's life cycle as the runner drives it: prepare, services, opening, score per trial in that order,
and `close` once the run is over, also when a trial crashed or the run was interrupted."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import on_suite_path
from unscaffold.benchmarks.base import Score, Suite, Task
from unscaffold.llm.types import Message
from unscaffold.minimal_harness.sandbox.base import Sandbox, SandboxConfig, SandboxKind
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run

CALLS: list[str] = []


class RecordingSuite(Suite):
    """Two tasks; scoring `crash` raises."""

    name = "recording"

    def tasks(self, split: str | None = None) -> list[Task]:
        return [Task(id="fine", instruction="write ok"), Task(id="crash", instruction="write ok")]

    def prepare(self, task: Task, trial_dir: Path, kind: SandboxKind, *, oracle: bool = False) -> SandboxConfig:
        CALLS.append(f"prepare {task.id}")
        (trial_dir / "workspace").mkdir()
        return SandboxConfig(kind=kind, workspace=trial_dir / "workspace")

    @contextlib.contextmanager
    def services(self, task: Task, trial_dir: Path) -> Iterator[None]:
        CALLS.append(f"services {task.id}")
        try:
            yield
        finally:
            CALLS.append(f"services over {task.id}")

    def opening(self, task: Task, trial_dir: Path, style: str) -> list[Message] | None:
        CALLS.append(f"opening {task.id}")
        return None

    def oracle_commands(self, task: Task) -> list[str]:
        return ["echo ok > answer.txt"]

    def score(self, task: Task, trial_dir: Path, sandbox: Sandbox, trajectory: Trajectory) -> Score:
        CALLS.append(f"score {task.id}")
        if task.id == "crash":
            raise RuntimeError("the scorer broke")
        return Score(reward=1.0)

    def close(self) -> None:
        CALLS.append("close")


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """The suite registered as a folder of its own on the search path, whose suite module is this one's."""
    folder = tmp_path / "suites" / "recording"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "suite.py").write_text(f"from {__name__} import RecordingSuite as RecordingSuite\n")
    (folder / "suite.toml").write_text('description = "two tasks, one whose scorer crashes"\n'
                                       'suite = "suite:RecordingSuite"\n')
    on_suite_path(monkeypatch, folder.parent)
    CALLS.clear()
    return CALLS


def config(tmp_path: Path, task: str) -> RunConfig:
    return RunConfig(suite="recording", student="oracle", out=tmp_path / "run", task_ids=[task],
                     sandbox={"kind": "none"}, infra_retries=0)


def test_the_runner_walks_the_life_cycle_and_closes_after_a_crashed_trial(recording: list[str],
                                                                           tmp_path: Path) -> None:
    summary = run(config(tmp_path, "crash"))
    result = json.loads((tmp_path / "run" / "trials" / "crash" / "result.json").read_text())
    assert (result["outcome"], result["reason"]) == ("verifier_error",
                                                     "the verifier crashed: RuntimeError: the scorer broke")
    assert summary.per_task == {"crash": 0.0}
    assert recording == ["prepare crash", "services crash", "opening crash", "score crash", "services over crash",
                         "close"]


def test_a_passing_trial_and_a_stopped_run_close_the_suite_too(recording: list[str], tmp_path: Path) -> None:
    assert run(config(tmp_path / "a", "fine")).per_task == {"fine": 1.0}
    assert recording[-1] == "close" and recording.count("close") == 1
    recording.clear()

    def interrupt(result: object) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # Ctrl-C while the run reports a finished trial
        run(config(tmp_path / "b", "fine"), progress=interrupt)
    assert recording == ["prepare fine", "services fine", "opening fine", "score fine", "services over fine", "close"]


def test_a_suite_is_a_context_manager_that_closes() -> None:
    CALLS.clear()
    with RecordingSuite() as suite:
        assert suite.tasks()[0].id == "fine"
    assert CALLS == ["close"]
