"""End to end: `unscaffold run harbor` gives exact rewards, writes the contract files and resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perf.harness_overhead import make_tasks
from tests.helpers import HARBOR_EXAMPLES, HARBOR_REPLAY, ROOT, call, eventually, final, needs_bwrap
from unscaffold.cli import app
from unscaffold.errors import InputError
from unscaffold.minimal_harness.sandbox.disk import mounts_below
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run

pytestmark = needs_bwrap
EXPECTED = {"csv-total": 1.0, "fix-fibonacci": 0.8, "hello-file": 1.0, "word-stats": 0.0}


def test_replay_student_gets_exact_rewards(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", "harbor", "--data", str(HARBOR_EXAMPLES), "--student",
                                      f"replay:{HARBOR_REPLAY}", "--concurrency", "2", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["per_task"] == EXPECTED
    assert results["pass_at_1"] == 50.0
    assert results["n_tasks"] == 4 and results["suite"] == "harbor"
    assert results["reviewer_calls"] == 0 and results["replacements"] == 0
    assert results["exit_status"] == {"submitted": 4}
    assert set(results) >= {"suite", "n_tasks", "pass_at_1", "per_task", "reviewer_calls", "replacements", "tokens",
                            "wall_time_s"}
    for tid in EXPECTED:
        trial = tmp_path / "trials" / tid
        assert (trial / "trajectory.json").is_file() and (trial / "result.json").is_file()
        assert (trial / "reviews.jsonl").is_file()
    fib = json.loads((tmp_path / "trials" / "fix-fibonacci" / "result.json").read_text())
    assert fib["details"]["metrics"] == {"reward": 0.8, "passed": 4}
    words = json.loads((tmp_path / "trials" / "word-stats" / "result.json").read_text())
    assert words["reward"] == 0.0 and words["turns"] == 2
    assert "pass@1 50.00%" in result.output


def test_oracle_scores_100(tmp_path: Path) -> None:
    summary = run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student="oracle", out=tmp_path, concurrency=4))
    assert summary.pass_at_1 == 100.0
    assert summary.per_task == {k: 1.0 for k in EXPECTED}


def test_tests_and_solution_are_hidden_from_the_student(tmp_path: Path, write_replay) -> None:
    spec = write_replay({"hello-file": [call("ls -A /tests | wc -l; ls /solution 2>&1; touch /tests/x"), final("x")]})
    summary = run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student=spec, out=tmp_path, task_ids=["hello-file"],
                            sandbox={"keep_workspace": True}))  # /tests is looked at afterwards
    traj = json.loads((tmp_path / "trials" / "hello-file" / "trajectory.json").read_text())
    observation = traj["messages"][3]["content"]
    assert observation == "0\nls: cannot access '/solution': No such file or directory\n\n[exit_code=0]"
    # /tests is writable, as Harbor gives it, but what the student left there is gone before the tests run
    assert sorted(p.name for p in (tmp_path / "trials" / "hello-file" / "tests").iterdir()) == ["test.sh"]
    assert summary.per_task == {"hello-file": 0.0}


def test_verifier_without_reward_file(tmp_path: Path, write_replay) -> None:
    task = tmp_path / "tasks" / "no-reward"
    (task / "tests").mkdir(parents=True)
    (task / "instruction.md").write_text("Do nothing.")
    (task / "task.toml").write_text("[verifier]\ntimeout_sec = 10\n")
    (task / "tests" / "test.sh").write_text("echo checked\n")
    summary = run(RunConfig(suite="harbor", data=task, student=write_replay({"*": [final("ok")]}), out=tmp_path / "r"))
    result = json.loads((tmp_path / "r" / "trials" / "no-reward" / "result.json").read_text())
    assert summary.per_task == {"no-reward": 0.0}
    assert result["reason"] == ("the verifier wrote no reward file (reward.txt or reward.json); the verifier exited 0, "
                                "ending: checked")
    assert result["outcome"] == "verifier_error"


def test_bad_task_toml_is_one_line_naming_file_and_field(tmp_path: Path) -> None:
    task = tmp_path / "bad"
    (task / "tests").mkdir(parents=True)
    (task / "instruction.md").write_text("x")
    (task / "tests" / "test.sh").write_text("true")
    (task / "task.toml").write_text("[verifier]\ntimeout_sec = 'soon'\n")
    with pytest.raises(InputError) as err:
        run(RunConfig(suite="harbor", data=task, student="oracle", out=tmp_path / "r"))
    assert str(err.value) == (f"{task / 'task.toml'}: verifier.timeout_sec: "
                              "Input should be a valid number, unable to parse string as a number")


def test_bad_replay_entry_names_the_file_and_field(tmp_path: Path, write_replay) -> None:
    spec = write_replay({"hello-file": [{"tool_call": {"name": "execute", "arguments": {}}, "contents": "x"}]})
    result = CliRunner().invoke(app, ["run", "harbor", "--data", str(HARBOR_EXAMPLES), "--student", spec,
                                      "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert f"error: {spec[len('replay:'):]}: hello-file[0].contents: Extra inputs are not permitted" in result.output


def test_resume_with_other_settings_is_refused(tmp_path: Path) -> None:
    run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student="oracle", out=tmp_path, task_ids=["hello-file"]))
    with pytest.raises(InputError, match="was started with other settings \\(student\\)"):
        run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student=f"replay:{HARBOR_REPLAY}", out=tmp_path,
                      task_ids=["hello-file"]))


def test_a_crash_in_one_trial_keeps_the_others(tmp_path: Path, write_replay, monkeypatch) -> None:
    from unscaffold.benchmarks.harbor.suite import HarborSuite

    original = HarborSuite.score

    def flaky(self, task, *args):
        if task.id == "csv-total":
            raise RuntimeError("scorer exploded")
        return original(self, task, *args)

    monkeypatch.setattr(HarborSuite, "score", flaky)
    summary = run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student="oracle", out=tmp_path, concurrency=2))
    assert summary.per_task == {**{k: 1.0 for k in EXPECTED}, "csv-total": 0.0}
    crashed = json.loads((tmp_path / "trials" / "csv-total" / "result.json").read_text())
    assert crashed["exception"] == "RuntimeError: scorer exploded"
    assert crashed["reason"] == "the verifier crashed: RuntimeError: scorer exploded"
    assert crashed["outcome"] == "verifier_error"
    assert summary.exceptions == 1


def passing_tasks(root: Path, n: int) -> tuple[Path, Path]:
    """`n` Harbor tasks that pass once a student has run one command, and that student's replay file."""
    replay = root / "replay.json"
    replay.write_text(json.dumps({"*": [call("echo ok > out.txt"), final("done")]}))
    return replay, make_tasks(root / "tasks", n)


def hanging_after(replay: Path, n: int) -> None:
    """Rewrite `replay` so that tasks t00..t{n-1} pass and every other task's commands hang: a run killed
    once n results exist is always half way, however fast or busy the machine."""
    passing = json.loads(replay.read_text())["*"]
    replay.write_text(json.dumps({**{f"t{i:02d}": passing for i in range(n)}, "*": [call("sleep 1000")] * 200}))


def test_sigkill_half_way_then_resume_finishes_every_trial_once(tmp_path: Path) -> None:
    replay, tasks = passing_tasks(tmp_path, 8)
    passing = replay.read_text()
    hanging_after(replay, 3)
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "unscaffold.cli", "run", "harbor", "--data", str(tasks), "--student",
            f"replay:{replay}", "--concurrency", "2", "--out", str(out)]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    assert eventually(lambda: len(list(out.glob("trials/*/result.json"))) == 3, timeout_s=120)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    replay.write_text(passing)  # the re-run's student passes every task
    finished_before = {p.parent.name: p.read_text() for p in out.glob("trials/*/result.json")}
    assert sorted(finished_before) == ["t00", "t01", "t02"]
    assert not (out / "results.json").exists()
    subprocess.run(argv, cwd=ROOT, check=True, capture_output=True, timeout=120)
    results = json.loads((out / "results.json").read_text())
    assert results["per_task"] == {f"t{i:02d}": 1.0 for i in range(8)}
    for name, text in finished_before.items():  # finished trials were not run again
        assert (out / "trials" / name / "result.json").read_text() == text
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    finished = [e["trial_id"] for e in events if e["event"] == "trial_finished"]
    assert sorted(finished) == [f"t{i:02d}" for i in range(8)]  # each exactly once
    assert not list(out.rglob("*.tmp"))
    # the killed trials' filesystems were unmounted on resume, so their folders were removed, not set aside
    assert mounts_below(out) == [] and not list((out / "trials").glob("*.stale-*"))


KILL_DRIVER = """
import os, sys
from pathlib import Path
from unscaffold.run import runner
from unscaffold.run.folder import RunFolder, TrialFolder
from unscaffold.run.models import RunConfig

kill_after = int(sys.argv[1])
count = 0

def counted(write):
    def wrapper(*args, **kwargs):
        global count
        write(*args, **kwargs)
        count += 1
        if count == kill_after:
            os._exit(9)  # as abrupt as SIGKILL: no cleanup, no flush
    return wrapper

RunFolder.append_event = counted(RunFolder.append_event)  # the events
TrialFolder.write_result = counted(TrialFolder.write_result)  # each trial's commit point
runner.run(RunConfig(suite="harbor", data=Path(sys.argv[2]), student="replay:" + sys.argv[3], out=Path(sys.argv[4])))
"""


def test_a_kill_after_any_write_then_resume_records_every_trial_exactly_once(tmp_path: Path) -> None:
    """Each trial writes three things (started event, result.json, finished event); the run is killed
    right after each of the nine writes in turn, including between a result and its event."""
    replay, tasks = passing_tasks(tmp_path, 3)
    for kill_after in range(1, 10):
        out = tmp_path / f"run{kill_after}"
        killed = subprocess.run([sys.executable, "-c", KILL_DRIVER, str(kill_after), str(tasks), str(replay), str(out)],
                                cwd=ROOT, capture_output=True, timeout=120)
        assert killed.returncode == 9, killed.stderr
        before = {p.parent.name: p.read_text() for p in out.glob("trials/*/result.json")}
        summary = run(RunConfig(suite="harbor", data=tasks, student=f"replay:{replay}", out=out))
        assert summary.per_task == {"t00": 1.0, "t01": 1.0, "t02": 1.0}, kill_after
        for name, text in before.items():  # a committed trial is never run again
            assert (out / "trials" / name / "result.json").read_text() == text
        events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
        finished = sorted(e["trial_id"] for e in events if e["event"] == "trial_finished")
        assert finished == ["t00", "t01", "t02"], (kill_after, finished)
        recovered = [e["trial_id"] for e in events if e.get("recovered")]
        assert recovered == (["t00", "t01", "t02"][kill_after // 3 - 0:kill_after // 3 + 1] if kill_after % 3 == 2
                             else []), kill_after


def test_a_trial_folder_that_cannot_be_removed_is_set_aside(tmp_path: Path, monkeypatch) -> None:
    from unscaffold.run import runner

    stuck = tmp_path / "trials" / "t0"
    stuck.mkdir(parents=True)
    (stuck / "trajectory.json").write_text("{}")

    def refuse(path, *a, **k):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(runner.shutil, "rmtree", refuse)
    runner.set_aside(stuck)
    assert not stuck.exists()
    assert (tmp_path / "trials" / "t0.stale-1" / "trajectory.json").read_text() == "{}"
