"""The real AppWorld adapter: set-up errors, command construction, files, the bridge round trip and TGC/SGC,
with a fake `appworld` package; the live test runs only where AppWorld is installed with its data."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import call, final, needs_bwrap
from unscaffold.benchmarks import load_suite
from unscaffold.benchmarks.appworld_real import bridge
from unscaffold.benchmarks.appworld_real.suite import (
    BRIDGE,
    AppWorldSuite,
    bridge_command,
    experiment_name,
    scenario_of,
)
from unscaffold.errors import InputError
from unscaffold.offline.appworld_lite.apis import STATE_DIR
from unscaffold.offline.appworld_lite.template_kit import heredoc
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run

SUPERVISOR = {"first_name": "Ada", "last_name": "Ng", "email": "ada@ng.org", "phone_number": "555-0100"}
# task id -> expected answer; scenario aaa1111 passes whole, bbb2222 fails on its second task
TASKS = {"aaa1111_1": "4", "aaa1111_2": "9", "bbb2222_1": "x", "bbb2222_2": "y"}

FAKE_APPWORLD = '''
"""A stand-in for AppWorld with the same surface the bridge uses."""
import contextlib, io, json, os, traceback


class _Supervisor:
    def __init__(self, world):
        self.world = world

    def show_profile(self):
        return dict(self.world.specs["supervisor"])

    def complete_task(self, answer=None):
        self.world.answer, self.world.completed = answer, True
        return {"message": "Marked the active task complete."}


class _ApiDocs:
    def show_app_descriptions(self):
        return [{"name": "supervisor", "description": "The supervisor."}, {"name": "admin", "description": "x"},
                {"name": "api_docs", "description": "The docs."}, {"name": "spotify", "description": "Music."}]


class _Apis:
    def __init__(self, world):
        self.supervisor = _Supervisor(world)
        self.api_docs = _ApiDocs()


class _Task:
    def __init__(self, specs):
        self.instruction, self.supervisor = specs["instruction"], specs["supervisor"]


class _Tracker:
    def __init__(self, success):
        self.success = success

    def to_dict(self):
        passes = [{"requirement": "assert answers match"}] if self.success else []
        fails = [] if self.success else [{"requirement": "assert answers match", "trace": "wrong"}]
        return {"success": self.success, "num_tests": 1, "passes": passes, "failures": fails}


class AppWorld:
    def __init__(self, task_id, experiment_name, **kwargs):
        if os.environ.get("FAKE_APPWORLD_BROKEN"):
            raise RuntimeError("no such task")
        root = os.environ["APPWORLD_ROOT"]
        with open(os.path.join(root, "data", "tasks", task_id, "specs.json")) as f:
            self.specs = json.load(f)
        self.task = _Task(self.specs)
        self.answer, self.completed, self.apis = None, False, _Apis(self)
        os.makedirs(os.path.join(root, "experiments", "outputs", experiment_name, "tasks", task_id), exist_ok=True)

    def execute(self, code):
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(code, {"apis": self.apis})
        except Exception:
            return "Execution failed. Traceback:\\n" + traceback.format_exc()
        return out.getvalue()

    def task_completed(self):
        return self.completed

    def evaluate(self):
        return _Tracker(self.completed and str(self.answer) == self.specs["fake_expected_answer"])

    def close(self):
        pass
'''


@pytest.fixture
def appworld_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An AppWorld root with a dev split of four tasks, and the fake package on the bridge's path."""
    root = tmp_path / "appworld"
    (root / "data" / "datasets").mkdir(parents=True)
    (root / "data" / "datasets" / "dev.txt").write_text("\n".join(TASKS) + "\n")
    for task_id, answer in TASKS.items():
        spec_dir = root / "data" / "tasks" / task_id
        spec_dir.mkdir(parents=True)
        specs = {"instruction": f"What is the code for {task_id}?", "supervisor": SUPERVISOR,
                 "fake_expected_answer": answer}
        (spec_dir / "specs.json").write_text(json.dumps(specs))
    fake = tmp_path / "fake_site" / "appworld"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(FAKE_APPWORLD)
    monkeypatch.setenv("PYTHONPATH", str(fake.parent))
    monkeypatch.setenv("APPWORLD_PYTHON", sys.executable)
    monkeypatch.delenv("APPWORLD_ROOT", raising=False)
    return root


OPENING = 24  # the official first turn: the system prompt and 23 messages before the student's first reply


def answer(value: str) -> list[dict]:
    return [call(heredoc(f"from apis import apis\nprint(apis.supervisor.show_profile())\n"
                         f"apis.supervisor.complete_task(answer={value!r})")), final("done")]


def test_setup_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, appworld_root: Path) -> None:
    with pytest.raises(InputError, match="needs --data APPWORLD_ROOT"):
        load_suite("appworld")
    with pytest.raises(InputError, match="no data/datasets/ here"):
        load_suite("appworld", tmp_path / "empty")
    monkeypatch.setenv("APPWORLD_PYTHON", str(tmp_path / "nope" / "python"))
    with pytest.raises(InputError, match="APPWORLD_PYTHON: no Python with AppWorld found"):
        load_suite("appworld", appworld_root)
    monkeypatch.delenv("APPWORLD_PYTHON")
    with pytest.raises(InputError, match=r"\.venv/bin/python"):
        load_suite("appworld", appworld_root)
    venv = appworld_root / ".venv" / "bin"
    venv.mkdir(parents=True)
    os.symlink(sys.executable, venv / "python")
    assert load_suite("appworld", appworld_root).python == venv / "python"


def test_tasks_scenarios_and_splits(appworld_root: Path) -> None:
    suite = load_suite("appworld", appworld_root)
    assert isinstance(suite, AppWorldSuite) and suite.splits() == ["dev"]
    tasks = suite.tasks("dev")
    assert [(t.id, t.scenario) for t in tasks] == [(tid, tid[:7]) for tid in TASKS]
    assert tasks[0].instruction.endswith("My name is Ada Ng. My email is ada@ng.org and my phone number is "
                                         "555-0100.\n\nTask: What is the code for aaa1111_1?")
    with pytest.raises(InputError, match="test_normal.txt not found"):
        suite.tasks()  # the default split
    with pytest.raises(InputError, match="no oracle"):
        suite.oracle_commands(tasks[0])
    (appworld_root / "data" / "tasks" / "aaa1111_2" / "specs.json").write_text("{}")
    with pytest.raises(InputError, match=r"aaa1111_2/specs.json: not an AppWorld task spec"):
        suite.tasks("dev")


def test_bridge_command_and_names(tmp_path: Path) -> None:
    argv = bridge_command(Path("/aw/.venv/bin/python"), "82e2fac_1", "unscaffold-x", tmp_path / "w.sock", 60)
    assert argv == ["/aw/.venv/bin/python", str(BRIDGE), "serve", "--task-id", "82e2fac_1", "--experiment",
                    "unscaffold-x", "--socket", str(tmp_path / "w.sock"), "--idle-timeout", "60"]
    assert scenario_of("82e2fac_1") == "82e2fac"
    a, b = experiment_name(tmp_path / "t1"), experiment_name(tmp_path / "t2")
    assert a != b and a == experiment_name(tmp_path / "t1") and a.startswith("unscaffold-")
    code = bridge.call_code("spotify", "show_song", {"song_id": 3})
    assert code == "print(repr(apis.spotify.show_song(**{'song_id': 3})))"
    with pytest.raises(ValueError):
        bridge.call_code("spotify", "show_song()); import os; (", {})
    assert not re.search(r"^\s*(from|import)\s+unscaffold", BRIDGE.read_text(), re.M)  # runs in AppWorld's Python


@needs_bwrap
def test_run_scores_with_appworld_verdicts_and_reports_tgc_sgc(tmp_path: Path, appworld_root: Path,
                                                               write_replay) -> None:
    replay = {tid: answer(value) for tid, value in TASKS.items()} | {"bbb2222_2": [
        call(heredoc("from apis import apis\napis.supervisor.show_nothing()")), *answer("wrong")]}
    summary = run(RunConfig(suite="appworld", data=appworld_root, split="dev", student=write_replay(replay),
                            out=tmp_path / "run", concurrency=2))
    assert summary.per_task == {"aaa1111_1": 1.0, "aaa1111_2": 1.0, "bbb2222_1": 1.0, "bbb2222_2": 0.0}
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["tgc"] == results["pass_at_1"] == 75.0 and results["sgc"] == 50.0
    trial = tmp_path / "run" / "trials" / "bbb2222_2"
    result = json.loads((trial / "result.json").read_text())
    assert result["reason"] == "AppWorld tests failed (0/1 passed)"
    assert result["details"]["failures"] == [{"requirement": "assert answers match", "trace": "wrong"}]
    traj = json.loads((trial / "trajectory.json").read_text())
    error = [m["content"] for m in traj["messages"][OPENING:] if m["role"] == "tool"][0]
    assert "ApiError: Execution failed. Traceback:" in error and "has no attribute 'show_nothing'" in error
    workspace = trial / "workspace"
    assert sorted(p.name for p in workspace.iterdir()) == [".apps", "apis.py"]
    assert sorted(p.name for p in (workspace / STATE_DIR).iterdir()) == ["calls.jsonl", "task.json"]  # socket gone
    assert (appworld_root / "experiments" / "outputs" / result["details"]["experiment"]).is_dir()
    leftover = subprocess.run(["pgrep", "-f", f"{BRIDGE} serve"], capture_output=True, text=True).stdout.split()
    assert leftover == []


@needs_bwrap
def test_a_bridge_that_cannot_open_the_task_fails_the_trial(tmp_path: Path, appworld_root: Path,
                                                            monkeypatch: pytest.MonkeyPatch, write_replay) -> None:
    monkeypatch.setenv("FAKE_APPWORLD_BROKEN", "1")
    summary = run(RunConfig(suite="appworld", data=appworld_root, split="dev", task_ids=["aaa1111_1"],
                            student=write_replay({"*": [final("x")]}), out=tmp_path / "run"))
    result = json.loads((tmp_path / "run" / "trials" / "aaa1111_1" / "result.json").read_text())
    assert summary.per_task == {"aaa1111_1": 0.0}
    assert result["exception"] == ("RuntimeError: the AppWorld bridge could not open the task: "
                                   "RuntimeError: no such task")


@needs_bwrap
def test_a_bridge_left_by_a_crashed_trial_stops_when_the_run_ends(tmp_path: Path, appworld_root: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  write_replay) -> None:
    """A trial that crashes after its bridge started is never scored, so scoring never stops that bridge: the
    runner closes the suite when the run ends, and closing stops it (not only at the process's exit)."""
    def crash(self: AppWorldSuite, task: object, trial_dir: Path, style: str) -> None:
        raise RuntimeError("the opening broke")

    monkeypatch.setattr(AppWorldSuite, "opening", crash)
    summary = run(RunConfig(suite="appworld", data=appworld_root, split="dev", task_ids=["aaa1111_1"],
                            student=write_replay({"*": [final("x")]}), out=tmp_path / "run"))
    result = json.loads((tmp_path / "run" / "trials" / "aaa1111_1" / "result.json").read_text())
    assert summary.per_task == {"aaa1111_1": 0.0}
    assert (result["outcome"], result["exception"]) == ("infra_error", "RuntimeError: the opening broke")
    leftover = subprocess.run(["pgrep", "-f", f"{BRIDGE} serve"], capture_output=True, text=True).stdout.split()
    assert leftover == []


def live_appworld() -> tuple[Path, str] | None:
    root, python = os.environ.get("APPWORLD_ROOT"), os.environ.get("APPWORLD_PYTHON")
    if not (root and python and (Path(root) / "data" / "datasets" / "dev.txt").is_file()):
        return None
    probe = subprocess.run([python, "-c", "import appworld"], capture_output=True)
    return (Path(root), python) if probe.returncode == 0 else None


@needs_bwrap
@pytest.mark.skipif(live_appworld() is None, reason="AppWorld is not installed (APPWORLD_ROOT, APPWORLD_PYTHON)")
def test_live_appworld_task_is_scored_by_its_evaluator(tmp_path: Path, write_replay) -> None:
    found = live_appworld()
    assert found is not None
    root, _ = found
    suite = load_suite("appworld", root)
    task = suite.tasks("dev")[0]
    replay = {task.id: [call(heredoc("from apis import apis\nprint(apis.api_docs.show_app_descriptions())\n"
                                     "apis.supervisor.complete_task()")), final("done")]}
    run(RunConfig(suite="appworld", data=root, split="dev", task_ids=[task.id], student=write_replay(replay),
                  out=tmp_path))
    result = json.loads((tmp_path / "trials" / task.id / "result.json").read_text())
    assert result["exception"] is None
    assert result["details"]["num_tests"] > 0 and result["details"]["completed"] is True


@needs_bwrap
def test_the_episode_starts_with_the_official_24_messages(tmp_path: Path, appworld_root: Path,
                                                           write_replay) -> None:
    replay = write_replay({tid: answer(value) for tid, value in TASKS.items()})
    (tmp_path / "split.txt").write_text("train:\naaa1111_1\ntest:\nbbb2222_2\naaa1111_2\n")
    summary = run(RunConfig(suite="appworld", data=appworld_root, split="test", split_file=tmp_path / "split.txt",
                            student=replay, out=tmp_path / "run"))
    assert summary.per_task == {"bbb2222_2": 1.0, "aaa1111_2": 1.0}  # exactly the listed test ids
    assert sorted(p.name for p in (tmp_path / "run" / "trials").iterdir()) == ["aaa1111_2", "bbb2222_2"]
    messages = json.loads((tmp_path / "run" / "trials" / "aaa1111_2" / "trajectory.json").read_text())["messages"]
    opening = messages[:OPENING]
    assert [m["role"] for m in opening] == ["system", "user", *["assistant", "tool"] * 10, "user", "user"]
    intro, rules, current = opening[1]["content"], opening[22]["content"], opening[23]["content"]
    apps = [{"name": "api_docs", "description": "The docs."}, {"name": "spotify", "description": "Music."},
            {"name": "supervisor", "description": "The supervisor."}]  # admin left out, sorted by name
    assert json.dumps(apps, indent=1) in intro and "My name is Demo User." in intro
    assert "How many playlists do I have in my Spotify playlist library?" in intro
    assert opening[3]["content"] == json.dumps(apps, indent=1) + "\n[exit_code=0]"  # the demo's first output
    calls = [m["tool_calls"][0]["function"]["arguments"]["command"] for m in opening if m["role"] == "assistant"]
    assert all(c.startswith("python3 - <<'PY'\nfrom apis import apis\n") for c in calls)
    assert "apis.supervisor.complete_task(answer=23)" in calls[-1]
    assert "go on until a page comes back empty" in rules
    assert current == ("[CURRENT TASK]\nThis is a new task: nothing from the example ran here and none of its "
                       "values are live.\n\nMy name is Ada Ng. My email is ada@ng.org and my phone number is "
                       "555-0100.\n\nTask: What is the code for aaa1111_2?")
    assert messages[OPENING]["role"] == "assistant"  # then the student's own first reply
    plain = run(RunConfig(suite="appworld", data=appworld_root, split="dev", task_ids=["aaa1111_1"],
                          opening="plain", student=replay, out=tmp_path / "plain"))
    assert plain.per_task == {"aaa1111_1": 1.0}
    first = json.loads((tmp_path / "plain" / "trials" / "aaa1111_1" / "trajectory.json").read_text())["messages"]
    assert [m["role"] for m in first[:3]] == ["system", "user", "assistant"]
