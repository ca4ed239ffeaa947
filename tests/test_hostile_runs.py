"""One-line tricks of a hostile student, end to end: none earns reward, reads or writes a host file,
crashes the run or reaches the training data."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from tests.helpers import call, final, needs_bwrap
from tests.test_hostile_sandbox import FORK_CHAIN, needs_gcc
from unscaffold.benchmarks.harbor.reward import read_reward
from unscaffold.minimal_harness.sandbox import owner
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run
from unscaffold.sft.build import build_sft

pytestmark = needs_bwrap
HOST_CANARY = "HOST-CANARY-5d1e"
CARBONS = "C" * 20_000


def harbor_task(root: Path, name: str, test_sh: str) -> Path:
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "instruction.md").write_text("Write ok to /app/out.txt.")
    (task / "task.toml").write_text("[verifier]\ntimeout_sec = 20\n")
    (task / "tests" / "test.sh").write_text(test_sh)
    return task


HONEST_VERIFIER = ('if [ "$(cat /app/out.txt 2>/dev/null)" = ok ]; then r=1; else r=0; fi\n'
                   'echo "{\\"reward\\": $r}" > /logs/verifier/reward.json\n')


def run_files(out: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file() and not p.is_symlink()
                     and p.suffix in (".json", ".jsonl", ".txt", ".html"))


@pytest.mark.parametrize("trick", [
    "echo 1 > /logs/verifier/reward.txt",  # a reward written before the verifier runs
    "echo 1 > r.txt; ln -s ../../workspace/r.txt /logs/verifier/reward.txt",  # a link the host would follow
    "mkdir -p /tmp/t && echo 'echo 1 > /logs/verifier/reward.txt' > /tmp/t/test.sh; mount -t tmpfs none /tests; "
    "cp /tmp/t/test.sh /tests/",  # a test of one's own
    "echo 1 > /logs/verifier/reward.txt; chattr +i /logs/verifier/reward.txt",  # an undeletable reward
])
def test_harbor_reward_tricks_score_zero(tmp_path: Path, write_replay, trick: str) -> None:
    harbor_task(tmp_path / "tasks", "t", HONEST_VERIFIER)
    spec = write_replay({"t": [call(trick), final("done")]})
    summary = run(RunConfig(suite="harbor", data=tmp_path / "tasks", student=spec, out=tmp_path / "run"))
    result = json.loads((tmp_path / "run" / "trials" / "t" / "result.json").read_text())
    assert summary.per_task == {"t": 0.0}
    assert result["outcome"] == "failed" and result["details"]["source"] == "reward.json"


def test_harbor_host_file_is_never_overwritten_through_tests(tmp_path: Path, write_replay) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    harbor_task(tmp_path / "tasks", "t", HONEST_VERIFIER)
    spec = write_replay({"t": [call(f"ln -s {victim} /tests/test.sh; echo ok > out.txt"), final("done")]})
    summary = run(RunConfig(suite="harbor", data=tmp_path / "tasks", student=spec, out=tmp_path / "run"))
    assert victim.read_text() == "untouched"
    assert summary.per_task == {"t": 1.0}  # the real tests ran, and the honest work counts


@pytest.mark.parametrize(("verifier", "reason"), [
    ("echo 1e309 > /logs/verifier/reward.txt", "reward.txt holds the reward inf, outside [0, 1]"),
    ("echo 2 > /logs/verifier/reward.txt", "reward.txt holds the reward 2.0, outside [0, 1]"),
    ("echo nan > /logs/verifier/reward.txt", "reward.txt holds the reward nan, outside [0, 1]"),
    ("python3 -c \"print('[' * 990 + ']' * 990)\" > /logs/verifier/reward.json",
     "reward.json is nested too deeply"),
    ("truncate -s 100M /logs/verifier/reward.txt",
     "the verifier's reward.txt is 100 MB, over the 64 KB limit"),
    (f"echo {HOST_CANARY} > /tmp/c; ln -s /tmp/c /logs/verifier/reward.txt",
     "the verifier's reward.txt is a symbolic link; the scorer follows no links"),
])
def test_bad_rewards_are_verifier_errors_and_results_still_written(tmp_path: Path, write_replay, verifier: str,
                                                                    reason: str) -> None:
    harbor_task(tmp_path / "tasks", "bad", verifier + "\n")
    harbor_task(tmp_path / "tasks", "good", HONEST_VERIFIER)
    spec = write_replay({"*": [call("echo ok > out.txt"), final("done")]})
    summary = run(RunConfig(suite="harbor", data=tmp_path / "tasks", student=spec, out=tmp_path / "run"))
    bad = json.loads((tmp_path / "run" / "trials" / "bad" / "result.json").read_text())
    assert bad["outcome"] == "verifier_error" and bad["reward"] == 0.0
    assert bad["reason"].startswith(reason + "; the verifier exited 0")
    assert summary.per_task == {"bad": 0.0, "good": 1.0}
    assert summary.outcomes == {"passed": 1, "verifier_error": 1}
    assert json.loads((tmp_path / "run" / "results.json").read_text())["per_task"] == {"bad": 0.0, "good": 1.0}
    assert HOST_CANARY not in run_files(tmp_path / "run").replace(verifier, "")


def test_reward_json_details_are_a_bounded_summary(tmp_path: Path) -> None:
    (tmp_path / "reward.json").write_text(json.dumps({"reward": 1, "log": "x" * 50_000,
                                                      **{f"m{i}": i for i in range(100)}}))
    score = read_reward(tmp_path)
    assert score.reward == 1.0 and score.outcome is None
    assert len(score.details["metrics"]) == 32 and "log" not in score.details["metrics"]


def retro_run(tmp_path: Path, write_replay, commands: dict[str, str]) -> tuple[dict, Path]:
    spec = write_replay({task: [call(cmd), final("done")] for task, cmd in commands.items()})
    out = tmp_path / "run"
    summary = run(RunConfig(suite="retrosynthesis", student=spec, out=out, task_ids=sorted(commands)))
    results = {t: json.loads((out / "trials" / t / "result.json").read_text()) for t in commands}
    return {"summary": summary, **results}, out


def test_retrosynthesis_gold_is_out_of_reach(tmp_path: Path, write_replay) -> None:
    from unscaffold.benchmarks.retrosynthesis.suite import RetrosynthesisSuite

    task = RetrosynthesisSuite().tasks("test")[0].id
    steal = ("python3 -c \"from unscaffold.benchmarks.retrosynthesis.suite import RetrosynthesisSuite as S; "
             "s = S(); print(s.reaction(s.tasks()[0]).recorded_answer())\" > answer.txt; cat answer.txt")
    results, out = retro_run(tmp_path, write_replay, {task: steal})
    assert results[task]["reward"] == 0.0 and results[task]["outcome"] == "failed"
    traj = json.loads((out / "trials" / task / "trajectory.json").read_text())
    assert "No module named 'unscaffold'" in traj["messages"][3]["content"]


def test_retrosynthesis_links_crashes_and_floods_cost_only_their_trial(tmp_path: Path, write_replay) -> None:
    from unscaffold.benchmarks.retrosynthesis.suite import RetrosynthesisSuite

    suite = RetrosynthesisSuite()
    tasks = [t.id for t in suite.tasks("test")[:4]]
    honest = suite.reaction(suite.tasks("test")[3]).recorded_answer()
    canary = tmp_path / "host-secret.txt"
    canary.write_text(HOST_CANARY)
    results, out = retro_run(tmp_path, write_replay, {
        tasks[0]: f"ln -sf {canary} answer.txt",
        tasks[1]: "ln -sf /proc/self/environ answer.txt",
        tasks[2]: f"echo {CARBONS} > answer.txt",
        tasks[3]: f"echo '{honest}' > answer.txt",
    })
    link = "answer.txt is a symbolic link; the scorer follows no links"
    assert (results[tasks[0]]["reason"], results[tasks[1]]["reason"]) == (link, link)
    assert results[tasks[2]]["outcome"] == "verifier_error"
    assert results[tasks[2]]["reason"] == "RDKit scoring of answer.txt crashed (exit code -11)"
    assert results[tasks[3]]["outcome"] == "passed" and results[tasks[3]]["reward"] == 1.0
    assert results["summary"].per_task == {tasks[0]: 0.0, tasks[1]: 0.0, tasks[2]: 0.0, tasks[3]: 1.0}
    text = run_files(out)
    assert HOST_CANARY not in text and "PATH=" not in text.replace('"PATH"', "")
    report = build_sft([out], tmp_path / "sft.jsonl", keep_all=True)
    assert report.kept == 1 and report.dropped == {"refused_artifact": 2, "verifier_error": 1}


def test_workspace_flood_ends_the_trial_with_the_reason(tmp_path: Path, write_replay, monkeypatch) -> None:
    from unscaffold.minimal_harness import agent
    from unscaffold.minimal_harness.sandbox.base import Limits
    from unscaffold.minimal_harness.sandbox.watchdog import workspace_overflow

    small = Limits(workspace_bytes=1024 * 1024)
    monkeypatch.setattr(agent, "workspace_overflow", lambda workspace, limits: workspace_overflow(workspace, small))
    harbor_task(tmp_path / "tasks", "t", HONEST_VERIFIER)
    spec = write_replay({"t": [call("head -c 3000000 /dev/zero > fill.bin"), call("echo ok > out.txt"),
                               final("done")]})
    run(RunConfig(suite="harbor", data=tmp_path / "tasks", student=spec, out=tmp_path / "run"))
    result = json.loads((tmp_path / "run" / "trials" / "t" / "result.json").read_text())
    assert result["exit_status"] == "resource_limit" and result["turns"] == 1
    assert result["outcome"] == "failed"
    assert result["reason"].endswith("the trial was stopped: the workspace grew past 1 MiB")


def fork_chain_run(tmp_path: Path, write_replay, trials: int) -> tuple[dict, Path]:
    victim = tmp_path / "victim"
    (victim / "deep").mkdir(parents=True)
    for name in ("a.txt", "deep/b.txt"):
        (victim / name).write_text("host file")
    harbor_task(tmp_path / "tasks", "t", HONEST_VERIFIER)
    source = FORK_CHAIN.replace("VICTIM", str(victim))
    start = (f"cat > chain.c <<'EOF'\n{source}EOF\ngcc -O2 -w -o chain chain.c && "
             "{ setsid ./chain > /dev/null 2>&1 & sleep 1; echo started; }")
    spec = write_replay({"t": [call(start), final("done")]})
    summary = run(RunConfig(suite="harbor", data=tmp_path / "tasks", student=spec, out=tmp_path / "run",
                            trials=trials, concurrency=2))
    return summary.outcomes, victim


def owners(folder: Path) -> set[tuple[int, int]]:
    return {(p.lstat().st_uid, p.lstat().st_gid) for p in [folder, *folder.rglob("*")]}


def assert_fork_chain_contained(tmp_path: Path, write_replay, trials: int) -> None:
    outcomes, victim = fork_chain_run(tmp_path, write_replay, trials)
    assert outcomes == {"failed": trials}  # no trial earns the reward the daemon would write
    assert owners(victim) == {(os.getuid(), os.getgid())}
    for trial in (tmp_path / "run" / "trials").iterdir():
        result = json.loads((trial / "result.json").read_text())
        assert (result["reward"], result["details"]["source"]) == (0.0, "reward.json")


@needs_gcc
def test_a_fork_chain_daemon_never_reaches_scoring(tmp_path: Path, write_replay) -> None:
    assert_fork_chain_contained(tmp_path, write_replay, trials=6)


@needs_gcc
@pytest.mark.slow
def test_fifty_fork_chain_daemons_never_reach_scoring(tmp_path: Path, write_replay) -> None:
    assert_fork_chain_contained(tmp_path, write_replay, trials=50)


def test_an_answer_full_of_markup_and_escapes_prints_inert_in_the_summary(tmp_path: Path, write_replay) -> None:
    """A verifier quotes the student's answer; the summary table shows it as plain text: no escape
    sequence (window title, cleared screen, clipboard write) reaches the terminal and `[/]` is no markup."""
    from typer.testing import CliRunner

    from unscaffold.cli import app

    harbor_task(tmp_path / "tasks", "t", "cat /app/out.txt\n")  # quotes the answer, writes no reward
    answer = r"\033]0;pwned-title\007\033[2J\033]52;c;cHduZWQ=\007[/] [bold]loud[/bold] \302\23331m done"
    spec = write_replay({"t": [call(f"printf '{answer}' > out.txt"), final("done")]})
    result = CliRunner().invoke(app, ["run", "harbor", "--data", str(tmp_path / "tasks"), "--student", spec,
                                      "--out", str(tmp_path / "run")], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert not any(c in result.output for c in "\x1b\x07\x9b")
    reason = ("the verifier wrote no reward file (reward.txt or reward.json); the verifier exited 0, ending: "
              "]0;pwned-title[2J]52;c;cHduZWQ=[/] [bold]loud[/bold] 31m done")
    assert reason in result.output
    stored = json.loads((tmp_path / "run" / "trials" / "t" / "result.json").read_text())
    assert stored["outcome"] == "verifier_error" and "\x1b]0;pwned-title\x07" in stored["reason"]


def test_six_gib_reserved_in_the_workspace_fail_at_the_limit_and_nothing_stays(tmp_path: Path, write_replay) -> None:
    """Disk is bounded as it is written, for the workspace and Harbor's /logs/agent together; after the
    trial the host keeps its record and nothing else."""
    if os.geteuid() != 0:
        pytest.skip("a filesystem of the trial's own is made only when the host runs as root")
    harbor_task(tmp_path / "tasks", "t", HONEST_VERIFIER)
    reserve = ("for i in 1 2 3 4 5 6; do fallocate -l 1G part$i || break; done; echo reserved=$(ls part* | wc -l); "
               "head -c 100M /dev/zero > /logs/agent/fill; echo agent=$?; echo ok > out.txt")
    spec = write_replay({"t": [call(reserve), final("done")]})
    summary = run(RunConfig(suite="harbor", data=tmp_path / "tasks", student=spec, out=tmp_path / "run"))
    trial = tmp_path / "run" / "trials" / "t"
    observation = json.loads((trial / "trajectory.json").read_text())["messages"][3]["content"]
    assert "fallocate: fallocate failed: No space left on device" in observation
    assert "reserved=4\n" in observation or "reserved=5\n" in observation  # 6 GiB asked, about 4 GiB given
    assert "agent=1\n" in observation  # the same limit holds in /logs/agent
    assert summary.per_task == {"t": 0.0}  # out.txt could not be written either: the disk was full
    assert sorted(str(p.relative_to(trial)) for p in trial.rglob("*") if not p.is_dir()) == [
        "evidence.jsonl", "result.json", "reviews.jsonl", "trajectory.json"]
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    assert [m for m in mounts if m.startswith(str(tmp_path)) or f"unscaffold-disk-{owner.token()}-" in m] == []
    assert not any(Path(tempfile.gettempdir()).glob(f"unscaffold-disk-{owner.token()}-*"))  # the image is deleted
    result = json.loads((trial / "result.json").read_text())
    assert result["isolation"].endswith("the workspace and writable folders on an ext4 image of 4 GiB of their "
                                        "own, dropped after")
