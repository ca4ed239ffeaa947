"""A Harbor task folder is untrusted input read as root: a link in it (to a host folder, a root-only file,
`/`) reads or writes nothing on the host; it is refused with one line naming the path."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.test_harbor_environment import make_task
from unscaffold.benchmarks.base import Task
from unscaffold.benchmarks.harbor.suite import HarborSuite
from unscaffold.cli import app
from unscaffold.errors import EnvironmentBroken, InputError
from unscaffold.nofollow import RefusedPath, check_tree, copy_in

LINK = "a symbolic link: a task folder may hold no links"
ESCAPE_DOCKERFILE = "FROM ubuntu:22.04\nWORKDIR /app\nCOPY . /app/\nCOPY payload.txt /app/dest/\n"


def root_only_file(tmp_path: Path) -> Path:
    secret = tmp_path / "host" / "shadow"
    secret.parent.mkdir()
    secret.write_text("root:secret-hash\n")
    secret.chmod(0o600)
    return secret


def test_a_link_in_environment_to_a_host_folder_receives_nothing(tmp_path: Path) -> None:
    """`COPY . /app/` would bring the link into the workspace and `COPY payload.txt /app/dest/` would
    then write through it into the host folder."""
    host = tmp_path / "cron.d"
    host.mkdir()
    task = make_task(tmp_path / "tasks", "escape", dockerfile=ESCAPE_DOCKERFILE,
                     files={"payload.txt": "* * * * * root x"})
    os.symlink(host, task / "environment" / "dest")
    result = CliRunner().invoke(app, ["run", "harbor", "--data", str(task), "--student", "oracle", "--sandbox", "local",
                                      "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {task / 'environment' / 'dest'}: {LINK}"
    assert list(host.iterdir()) == []
    assert not (tmp_path / "r" / "trials").exists()


@pytest.mark.parametrize("where", ["environment/workspace/secret", "tests/secret", "solution/secret", "secret"])
def test_a_link_to_a_root_only_file_is_refused_with_one_line(tmp_path: Path, where: str) -> None:
    secret = root_only_file(tmp_path)
    task = make_task(tmp_path / "tasks", "reader", solve="true\n")
    (task / where).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(secret, task / where)
    with pytest.raises(InputError) as err:
        HarborSuite(task)
    assert str(err.value) == f"{task / where}: {LINK}"


def test_a_link_to_the_root_folder_copies_nothing_and_skips_only_its_task(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    make_task(tasks, "good")
    bad = make_task(tasks, "rooted")
    (bad / "environment").mkdir()
    os.symlink("/", bad / "environment" / "workspace")
    suite = HarborSuite(tasks)
    assert [t.id for t in suite.tasks()] == ["good"]
    assert suite.skipped_tasks() == {"rooted": f"{bad / 'environment' / 'workspace'}: {LINK}"}


def test_a_task_folder_that_is_itself_a_link_is_skipped(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    make_task(tasks, "good")
    elsewhere = make_task(tmp_path / "elsewhere", "real")
    os.symlink(elsewhere, tasks / "linked")
    suite = HarborSuite(tasks)
    assert [t.id for t in suite.tasks()] == ["good"]
    assert suite.skipped_tasks() == {"linked": f"{tasks / 'linked'}: {LINK}"}


def test_a_fifo_in_a_task_folder_is_refused(tmp_path: Path) -> None:
    task = make_task(tmp_path / "tasks", "fifo")
    os.mkfifo(task / "tests" / "pipe")
    with pytest.raises(InputError) as err:
        HarborSuite(task)
    assert str(err.value) == f"{task / 'tests' / 'pipe'}: a FIFO, not a file or a folder"


def test_a_link_made_after_loading_is_refused_when_the_workspace_is_seeded(tmp_path: Path) -> None:
    secret = root_only_file(tmp_path)
    task = make_task(tmp_path / "tasks", "late", files={"workspace/data.txt": "fine"})
    suite = HarborSuite(task)
    (task / "environment" / "workspace" / "data.txt").unlink()
    os.symlink(secret, task / "environment" / "workspace" / "data.txt")
    trial = tmp_path / "trial"
    with pytest.raises(EnvironmentBroken) as err:
        suite.prepare(Task(id="late", instruction="x"), trial, "local")
    assert str(err.value) == f"{task / 'environment' / 'workspace' / 'data.txt'}: {LINK}"
    assert list((trial / "workspace").iterdir()) == []


def test_a_link_made_after_loading_is_not_copied_by_a_copy_step(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    task = make_task(tmp_path / "tasks", "late-copy", dockerfile=ESCAPE_DOCKERFILE, files={"payload.txt": "x"})
    suite = HarborSuite(task)
    os.symlink(host, task / "environment" / "dest")
    with pytest.raises(EnvironmentBroken) as err:
        suite.prepare(Task(id="late-copy", instruction="x"), tmp_path / "trial", "local")
    assert str(err.value) == f"{task / 'environment' / 'dest'}: {LINK}"
    assert list(host.iterdir()) == []


def test_seed_files_and_copies_arrive_with_their_modes(tmp_path: Path) -> None:
    task = make_task(tmp_path / "tasks", "seed", dockerfile="FROM ubuntu\nWORKDIR /app\nCOPY run.sh bin/\n",
                     files={"run.sh": "echo hi\n", "workspace/sub/data.txt": "42"})
    (task / "environment" / "run.sh").chmod(0o755)
    suite = HarborSuite(task)
    suite.prepare(Task(id="seed", instruction="x"), tmp_path / "trial", "local")
    workspace = tmp_path / "trial" / "workspace"
    assert (workspace / "sub" / "data.txt").read_text() == "42"
    assert (workspace / "bin" / "run.sh").read_text() == "echo hi\n"
    assert (workspace / "bin" / "run.sh").stat().st_mode & 0o777 == 0o755


def test_copy_in_refuses_a_link_in_the_targets_path(tmp_path: Path) -> None:
    source, dest, host = tmp_path / "src", tmp_path / "dest", tmp_path / "host"
    for folder in (source, dest, host):
        folder.mkdir()
    (source / "f.txt").write_text("x")
    os.symlink(host, dest / "out")
    with pytest.raises(RefusedPath) as err:
        copy_in(source, "f.txt", dest, "out/f.txt")
    assert str(err.value) == f"{dest / 'out'}: a symbolic link (never followed)"
    os.symlink(host / "planted", dest / "g.txt")
    with pytest.raises(RefusedPath) as err:
        copy_in(source, "f.txt", dest, "g.txt")
    assert str(err.value) == f"{dest / 'g.txt'}: a symbolic link (never followed)"
    assert list(host.iterdir()) == []


def test_copy_in_refuses_paths_that_climb_out(tmp_path: Path) -> None:
    with pytest.raises(RefusedPath) as err:
        copy_in(tmp_path, "../etc/passwd", tmp_path, "x")
    assert str(err.value) == "../etc/passwd: not a path inside its folder"


def test_check_tree_passes_a_plain_folder(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c.txt").write_text("x")
    check_tree(tmp_path)
    os.symlink("c.txt", tmp_path / "a" / "b" / "d.txt")  # even a link that stays inside
    with pytest.raises(RefusedPath) as err:
        check_tree(tmp_path)
    assert err.value.link and err.value.path == tmp_path / "a" / "b" / "d.txt"


def test_results_of_a_folder_of_tasks_name_the_link(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    make_task(tasks, "good", solve="true\n")
    bad = make_task(tasks, "bad")
    os.symlink(root_only_file(tmp_path), bad / "tests" / "secret")
    result = CliRunner().invoke(app, ["run", "harbor", "--data", str(tasks), "--student", "oracle",
                                      "--out", str(tmp_path / "r")])
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    assert results["skipped_tasks"] == {"bad": f"{bad / 'tests' / 'secret'}: {LINK}"}
    assert results["per_task"] == {"good": 1.0}
    assert result.exit_code == 1


def test_a_dockerfile_replaced_by_a_link_after_loading_is_not_read(tmp_path: Path) -> None:
    """Its lines would be quoted in the trial's record as skipped steps: a host file's text, as root."""
    secret = root_only_file(tmp_path)
    task = make_task(tmp_path / "tasks", "late-dockerfile", dockerfile="FROM ubuntu\nWORKDIR /app\n")
    suite = HarborSuite(task)
    (task / "environment" / "Dockerfile").unlink()
    os.symlink(secret, task / "environment" / "Dockerfile")
    line = f"{task / 'environment' / 'Dockerfile'}: {LINK}"
    with pytest.raises(EnvironmentBroken) as err:
        suite.prepare(Task(id="late-dockerfile", instruction="x"), tmp_path / "trial", "local")
    assert str(err.value) == line
    assert suite.environment_gaps(Task(id="late-dockerfile", instruction="x"), "local") == [line]
    assert not any("secret-hash" in m for m in suite.leak_markers())


def test_a_solution_replaced_by_a_link_after_loading_gives_no_leak_markers(tmp_path: Path) -> None:
    secret = root_only_file(tmp_path)
    secret.write_text("a line long enough to be a marker: secret-hash\n")
    task = make_task(tmp_path / "tasks", "late-solution", solve="echo a line long enough to be a marker > out\n")
    suite = HarborSuite(task)
    assert "echo a line long enough to be a marker > out" in suite.leak_markers()
    (task / "solution" / "solve.sh").unlink()
    os.symlink(secret, task / "solution" / "solve.sh")
    assert suite.leak_markers() == ["late-solution"]


def test_the_tests_replaced_by_a_link_after_loading_score_zero_with_the_reason(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    task = make_task(tmp_path / "tasks", "late-tests")
    suite = HarborSuite(task)
    for child in (task / "tests").iterdir():
        child.unlink()
    (task / "tests").rmdir()
    os.symlink(host, task / "tests")
    trial = tmp_path / "trial"
    suite.prepare(Task(id="late-tests", instruction="x"), trial, "local")
    score = suite.score(Task(id="late-tests", instruction="x"), trial, None, None)  # type: ignore[arg-type]
    assert (score.reward, score.outcome, score.reason) == (
        0.0, "verifier_error", f"could not copy the task's tests: {task / 'tests'}: {LINK}")
    assert list((trial / "tests").iterdir()) == []
