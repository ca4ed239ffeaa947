"""Harbor tasks as they are published: Dockerfiles the local sandbox applies in part, reference solutions
that fail, broken task folders, multi-step tasks, runs whose every trial failed for infrastructure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers import needs_bwrap
from unscaffold.cli import app
from unscaffold.errors import SandboxUnavailable
from unscaffold.offline.dockerfile import instructions, local_plan
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run

REWARD_IF = 'if {check}; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n'

GO_DOCKERFILE = """\
# a terminal-bench style environment
FROM ghcr.io/example/t-bench/golang:1.22
RUN apt-get update && \\
    apt-get install -y --no-install-recommends curl
WORKDIR /app
ENV GREETING=hello MODE="fast build"
COPY main.go /app/main.go
COPY data/ ./data/
COPY config.yaml /etc/service/config.yaml
ADD https://example.com/runner.tar.gz /opt/
USER nobody
CMD ["bash"]
"""


def make_task(root: Path, name: str, *, dockerfile: str | None = None, solve: str | None = None,
              check: str = "true", toml: str = "", files: dict[str, str] | None = None) -> Path:
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "instruction.md").write_text(f"Task {name}.")
    (task / "task.toml").write_text(toml)
    (task / "tests" / "test.sh").write_text(REWARD_IF.format(check=check))
    if solve is not None:
        (task / "solution").mkdir()
        (task / "solution" / "solve.sh").write_text(solve)
    if dockerfile is not None:
        (task / "environment").mkdir()
        (task / "environment" / "Dockerfile").write_text(dockerfile)
    for rel, text in (files or {}).items():
        path = task / "environment" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return task


def result_of(out: Path, trial: str) -> dict:
    return json.loads((out / "trials" / trial / "result.json").read_text())


def test_instructions_join_continuations_and_drop_comments() -> None:
    assert instructions(GO_DOCKERFILE)[:3] == [
        (2, "FROM", "ghcr.io/example/t-bench/golang:1.22"),
        (3, "RUN", "apt-get update &&  apt-get install -y --no-install-recommends curl"),
        (5, "WORKDIR", "/app"),
    ]


def test_local_plan_applies_what_it_can_and_lists_the_rest(tmp_path: Path) -> None:
    task = make_task(tmp_path, "go", dockerfile=GO_DOCKERFILE,
                     files={"main.go": "package main\n", "data/input.txt": "42\n", "config.yaml": "a: 1\n"})
    plan = local_plan(task / "environment" / "Dockerfile", "/app")
    assert plan.env == {"GREETING": "hello", "MODE": "fast build"}
    assert [(c.source.name, c.target) for c in plan.copies] == [("main.go", "main.go"), ("data", "data")]
    assert plan.skipped == [
        "line 2: FROM ghcr.io/example/t-bench/golang:1.22 (the local sandbox has no such image)",
        "line 3: RUN apt-get update &&  apt-get install -y --no-install-recommends curl (the local sandbox "
        "cannot run build steps)",
        "line 9: COPY config.yaml /etc/service/config.yaml (its target is outside the workspace /app)",
        "line 10: ADD https://example.com/runner.tar.gz /opt/ (its target is outside the workspace /app)",
    ]
    assert plan.not_applied == [*plan.skipped, "line 11: USER nobody (commands run as the sandbox's own user)",
                                "line 12: CMD [\"bash\"] (no effect on the commands the sandbox runs)"]


def test_local_plan_missing_source_and_plain_base_image(tmp_path: Path) -> None:
    task = make_task(tmp_path, "py", dockerfile="FROM python:3.13-slim-bookworm\nWORKDIR /app\nCOPY gone.txt .\n"
                     "ADD https://example.com/x.txt .\nCOPY --from=build /out/bin ./bin\n")
    assert local_plan(task / "environment" / "Dockerfile", "/app").skipped == [
        "line 3: COPY gone.txt . (gone.txt is not in the task's environment folder)",
        "line 4: ADD https://example.com/x.txt . (fetches from the network)",
        "line 5: COPY --from=build /out/bin ./bin (copies from another build stage)",
    ]


@needs_bwrap
def test_copied_files_and_env_reach_the_workspace_and_the_task_passes(tmp_path: Path) -> None:
    make_task(tmp_path / "tasks", "copy-env", solve='printf "%s %s" "$GREETING" "$(cat data/input.txt)" > out.txt\n',
              dockerfile="FROM python:3.11-slim\nWORKDIR /app\nENV GREETING=hello\nCOPY data ./data\n",
              files={"data/input.txt": "42"}, check='[ "$(cat /app/out.txt)" = "hello 42" ]')
    summary = run(RunConfig(suite="harbor", data=tmp_path / "tasks", student="oracle", out=tmp_path / "r"))
    assert summary.per_task == {"copy-env": 1.0}
    assert summary.outcomes == {"passed": 1}
    assert result_of(tmp_path / "r", "copy-env")["reason"] == ""


@needs_bwrap
def test_a_task_needing_its_image_is_environment_unsupported_with_its_lines_and_the_advice(tmp_path: Path) -> None:
    make_task(tmp_path / "tasks", "go-build", dockerfile=GO_DOCKERFILE, solve="go build -o hello main.go\n",
              check="[ -x /app/hello ]", files={"main.go": "package main\n", "data/input.txt": "42\n",
                                                "config.yaml": "a: 1\n"})
    result = CliRunner().invoke(app, ["run", "harbor", "--data", str(tmp_path / "tasks"), "--student", "oracle",
                                      "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    r = result_of(tmp_path / "r", "go-build")
    assert r["outcome"] == "environment_unsupported" and r["reward"] == 0.0
    assert r["reason"].startswith(
        "the sandbox could not set up the task's environment (line 2: FROM ghcr.io/example/t-bench/golang:1.22 (the "
        "local sandbox has no such image); line 3: RUN apt-get update")
    assert "run it with `--sandbox docker` to build the task's image; then: the reference solution exited 127 " \
           "(`bash /solution/solve.sh`), ending: " in r["reason"]
    assert "go: command not found" in r["reason"]
    assert len(r["details"]["environment_gaps"]) == 4 and r["details"]["environment_gaps"][0].startswith("line 2: FROM")
    assert "not the student's failures" in result.output and "environment_unsupported" in result.output


JQ_DOCKERFILE = "FROM ubuntu:24.04\nRUN apt-get update && apt-get install -y jq\nWORKDIR /app\n"


@needs_bwrap
def test_a_task_that_passes_on_the_hosts_programs_names_every_line_not_applied(tmp_path: Path) -> None:
    """`FROM ubuntu:24.04` + `RUN apt-get install jq` passes under `local` only because this machine has jq:
    result.json and the run's output name both lines, so nobody reads the pass as the task's environment's."""
    make_task(tmp_path / "tasks", "jq-sum", dockerfile=JQ_DOCKERFILE,
              solve="echo '[1,2,3]' | jq 'add' > /app/sum.txt\n", check='[ "$(cat /app/sum.txt)" = 6 ]')
    result = CliRunner().invoke(app, ["run", "harbor", "--data", str(tmp_path / "tasks"), "--student", "oracle",
                                      "--out", str(tmp_path / "r")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    r = result_of(tmp_path / "r", "jq-sum")
    assert (r["outcome"], r["reward"], r["reason"]) == ("passed", 1.0, "")
    notes = ["line 1: FROM ubuntu:24.04 (not pulled: commands see this machine's own system and programs)",
             "line 2: RUN apt-get update && apt-get install -y jq (the local sandbox cannot run build steps)"]
    assert r["environment_notes"] == notes
    assert ("jq-sum passed, with lines of its environment not applied: " + "; ".join(notes)
            + " (--sandbox docker builds the task's image)") in " ".join(result.output.split())


def test_split_without_a_split_file_is_refused_for_a_suite_whose_tasks_name_none(tmp_path: Path) -> None:
    make_task(tmp_path / "tasks", "plain", solve="true\n")
    result = CliRunner().invoke(app, ["run", "harbor", "--data", str(tmp_path / "tasks"), "--student", "oracle",
                                      "--split", "test", "--out", str(tmp_path / "r")])
    assert (result.exit_code, result.output) == (
        2, "error: --split: suite 'harbor' has no split 'test' (its tasks name none); give --split-file FILE "
        "(splits/README.md) or leave --split out\n")
    assert not (tmp_path / "r" / "trials").exists()


@needs_bwrap
def test_failing_reference_solution_is_an_environment_error_with_its_exit_code(tmp_path: Path) -> None:
    make_task(tmp_path / "tasks", "broken-solution", solve="echo fetching runner; exit 7\n", check="false")
    summary = run(RunConfig(suite="harbor", data=tmp_path / "tasks", student="oracle", out=tmp_path / "r"))
    r = result_of(tmp_path / "r", "broken-solution")
    assert summary.outcomes == {"environment_error": 1}
    assert r["reason"] == ("the reference solution exited 7 (`bash /solution/solve.sh`), ending: fetching runner "
                           "[exit_code=7]; then: reward 0")


@needs_bwrap
def test_broken_and_multi_step_folders_are_skipped_and_the_others_run(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    make_task(tasks, "good", solve="true\n")
    make_task(tasks, "bad-toml", toml="[verifier]\ntimeout_sec = 'soon'\n")
    make_task(tasks, "multi", toml='[[steps]]\ninstruction = "a"\n[[steps]]\ninstruction = "b"\n')
    (make_task(tasks, "no-tests") / "tests" / "test.sh").unlink()
    result = CliRunner().invoke(app, ["run", "harbor", "--data", str(tasks), "--student", "oracle",
                                      "--out", str(tmp_path / "r")])
    assert result.exit_code == 1
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    assert results["per_task"] == {"good": 1.0}
    assert results["skipped_tasks"] == {
        "bad-toml": f"{tasks / 'bad-toml' / 'task.toml'}: verifier.timeout_sec: Input should be a valid number, "
                    "unable to parse string as a number",
        "multi": f"{tasks / 'multi' / 'task.toml'}: steps: a multi-step task (2 [[steps]]) is not supported: "
                 "unscaffold runs one instruction per trial",
        "no-tests": f"{tasks / 'no-tests' / 'tests' / 'test.sh'}: file not found (the verifier entry point)",
    }
    assert "error: 3 task(s) skipped as unreadable: bad-toml, multi, no-tests" in result.output
    assert "skipped task multi:" in result.output


@needs_bwrap
def test_asking_for_a_skipped_task_says_why(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    make_task(tasks, "good")
    make_task(tasks, "multi", toml='[[steps]]\ninstruction = "a"\n')
    result = CliRunner().invoke(app, ["run", "harbor", "--data", str(tasks), "--student", "oracle", "--tasks", "multi",
                                      "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "--tasks: unknown task id(s) multi in suite 'harbor' (multi was skipped: " in result.output


@needs_bwrap
def test_every_trial_failing_for_infrastructure_exits_non_zero_with_the_cause(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import unscaffold.run.trial as trial

    def no_sandbox(config):
        raise SandboxUnavailable("Docker is not reachable (connection refused)")

    monkeypatch.setattr(trial, "open_sandbox", no_sandbox)
    tasks = tmp_path / "tasks"
    make_task(tasks, "a")
    make_task(tasks, "b")
    result = CliRunner().invoke(app, ["run", "harbor", "--data", str(tasks), "--student", "oracle",
                                      "--infra-retries", "0", "--out", str(tmp_path / "r")])
    assert result.exit_code == 1  # the first trial shows no trial can run: the second never starts
    assert result.output.endswith("error: no trial can make progress: the first trial failed for infrastructure: "
                                  "SandboxUnavailable: Docker is not reachable (connection refused)\n")
    assert sorted(p.name for p in (tmp_path / "r" / "trials").iterdir()) == ["a"]
    result = CliRunner().invoke(app, ["run", "harbor", "--data", str(tasks), "--student", "oracle",
                                      "--infra-retries", "0", "--tasks", "b", "--out", str(tmp_path / "b")])
    assert result.exit_code == 1  # a run of one trial finishes, then says why nothing passed
    assert result.output.endswith("error: SandboxUnavailable: Docker is not reachable (connection refused)\n")
    assert json.loads((tmp_path / "b" / "results.json").read_text())["outcomes"] == {"infra_error": 1}


def test_a_long_list_of_skipped_lines_is_cut_in_the_reason() -> None:
    from unscaffold.benchmarks.base import Score
    from unscaffold.minimal_harness.trajectory import Trajectory
    from unscaffold.run.trial import decide_outcome

    traj = Trajectory(trial_id="t", task_id="t", suite="harbor", student="oracle", tools=[], exit_status="submitted")
    gaps = [f"line {n}: RUN step {n} (the local sandbox cannot run build steps)" for n in range(1, 7)]
    assert decide_outcome(Score(reward=0.0), traj, False, gaps, None) == (
        "environment_unsupported",
        "the sandbox could not set up the task's environment (line 1: RUN step 1 (the local sandbox cannot run build "
        "steps); line 2: RUN step 2 (the local sandbox cannot run build steps); line 3: RUN step 3 (the local sandbox "
        "cannot run build steps); line 4: RUN step 4 (the local sandbox cannot run build steps); and 2 more (see "
        "details)): run it with `--sandbox docker` to build the task's image; then: reward 0")
    assert decide_outcome(Score(reward=1.0), traj, False, gaps, "the reference solution exited 1") == ("passed", "")


def test_docker_runs_the_tasks_own_image(tmp_path: Path) -> None:
    from unscaffold.benchmarks.harbor.suite import HarborSuite

    tasks = tmp_path / "tasks"
    make_task(tasks, "built", dockerfile=GO_DOCKERFILE, files={"main.go": "package main\n"})
    make_task(tasks, "pulled", toml='[environment]\ndocker_image = "ghcr.io/example/task:1"\n')
    make_task(tasks, "plain")
    suite = HarborSuite(tasks)
    by_id = {t.id: t for t in suite.tasks()}
    built = suite.prepare(by_id["built"], tmp_path / "t1", "docker")
    assert (built.image, built.build, built.seed_from_image, built.env) == (None, tasks / "built" / "environment",
                                                                           True, {})
    assert not (tmp_path / "t1" / "workspace" / "main.go").exists()  # the image's /app is copied in instead
    pulled = suite.prepare(by_id["pulled"], tmp_path / "t2", "docker")
    assert (pulled.image, pulled.build, pulled.seed_from_image) == ("ghcr.io/example/task:1", None, True)
    plain = suite.prepare(by_id["plain"], tmp_path / "t3", "docker")
    assert (plain.image, plain.build, plain.seed_from_image) == (None, None, False)  # the suites' image
    assert suite.environment_gaps(by_id["built"], "docker") == []
    assert suite.environment_gaps(by_id["pulled"], "local") == [
        "task.toml: docker_image = 'ghcr.io/example/task:1' (the local sandbox has no such image)"]
    local = suite.prepare(by_id["built"], tmp_path / "t4", "local")
    assert local.env == {"GREETING": "hello", "MODE": "fast build"}
    assert (tmp_path / "t4" / "workspace" / "main.go").read_text() == "package main\n"


def test_heredoc_bodies_belong_to_their_instruction() -> None:
    text = "FROM python:3.11\nRUN <<EOF\npip install pytest\necho done\nEOF\nWORKDIR /srv\n"
    assert instructions(text) == [(1, "FROM", "python:3.11"), (2, "RUN", "<<EOF"), (6, "WORKDIR", "/srv")]
