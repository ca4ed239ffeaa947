"""The docker sandbox against a real Docker engine: a hostile student gets no privilege, no project, no
network and bounded processes, memory and disk; the oracle passes every built-in suite, the example
Harbor tasks and a task whose image is built from its Dockerfile. Images are made locally when no
registry answers (`unscaffold image`), once per content hash. Skipped, saying why, where no engine answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import EXAMPLES, FORK_BOMB, HARBOR_EXAMPLES, ROOT
from unscaffold.errors import SandboxUnavailable
from unscaffold.minimal_harness.sandbox.base import Limits, Mount, SandboxConfig
from unscaffold.minimal_harness.sandbox.docker_sandbox import DockerSandbox
from unscaffold.offline import images
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run

pytestmark = pytest.mark.docker
HARBOR_DOCKER_EXAMPLES = EXAMPLES / "harbor_docker"
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def base_image(docker_engine: Any) -> str:
    """The base image made from this machine's Debian mirror (built once; skipped when it cannot be)."""
    try:
        return images.build_base(docker_engine, images.base_recipe())
    except SandboxUnavailable as e:
        pytest.skip(f"the local base image cannot be made here: {e}")


def box(engine: Any, image: str, tmp_path: Path, **kw: Any) -> DockerSandbox:
    return DockerSandbox(SandboxConfig(kind="docker", workspace=tmp_path / "ws", image=image, timeout_s=60, **kw),
                         client=engine)


def result_of(out: Path, trial: str) -> dict[str, Any]:
    return json.loads((out / "trials" / trial / "result.json").read_text())


# ---------------------------------------------------------------- a hostile student


def test_no_capabilities_and_not_root(docker_engine: Any, docker_suites_image: str, tmp_path: Path) -> None:
    with box(docker_engine, docker_suites_image, tmp_path) as sb:
        r = sb.execute("grep -E '^(CapPrm|CapEff|CapBnd|NoNewPrivs)' /proc/self/status; id -u; id -g")
    lines = r.output.splitlines()
    assert lines[:4] == ["CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000",
                         "NoNewPrivs:\t1"]
    assert int(lines[4]) != 0 and int(lines[5]) != 0
    assert int(lines[4]) == sb.uid or sb.uid is None


def test_root_and_read_only_mounts_take_no_writes(docker_engine: Any, docker_suites_image: str,
                                                  tmp_path: Path) -> None:
    (tmp_path / "task").mkdir()
    with box(docker_engine, docker_suites_image, tmp_path, mounts=[Mount(source=tmp_path / "task",
                                                                           target="/task")]) as sb:
        # one stream (docker delivers stdout and stderr apart, so their order would be a race)
        r = sb.execute("exec 2>&1; mount -o remount,bind,rw /task; mount -t tmpfs none /task; touch /task/x; "
                       "touch /x; touch /usr/local/bin/x; mknod /tmp/null2 c 1 3; echo done")
    assert r.output.count("must be superuser to use mount") == 2
    assert "touch: cannot touch '/task/x': Read-only file system" in r.output
    assert "touch: cannot touch '/x': Read-only file system" in r.output
    assert "touch: cannot touch '/usr/local/bin/x': Read-only file system" in r.output
    assert "mknod: /tmp/null2: Operation not permitted" in r.output
    assert r.output.endswith("done\n")
    assert list((tmp_path / "task").iterdir()) == []


def test_process_limit_holds(docker_engine: Any, docker_suites_image: str, tmp_path: Path) -> None:
    with box(docker_engine, docker_suites_image, tmp_path, limits=Limits(processes=40)) as sb:
        (tmp_path / "ws" / "bomb.py").write_text(FORK_BOMB)
        r = sb.execute("python3 bomb.py")
        after = sb.execute("echo still serving")
    made, refused, running = map(int, r.output.split())
    assert made + refused == 100 and refused >= 60
    assert running <= 40  # the container's 40 processes at most (its init, the exec wrapper, python, children)
    assert after.output == "still serving\n"  # the bomb's children were killed with its process group


def test_memory_limit_kills_the_hog_and_the_container_serves_on(docker_engine: Any, docker_suites_image: str,
                                                                tmp_path: Path) -> None:
    with box(docker_engine, docker_suites_image, tmp_path, limits=Limits(memory_bytes=256 * MiB)) as sb:
        hog = sb.execute("python3 -c 'b = bytearray(768 * 1024 * 1024); b[::4096] = b\"x\" * len(b[::4096]); "
                         "print(\"allocated\")'")
        small = sb.execute("python3 -c 'b = bytearray(64 * 1024 * 1024); print(\"fits\")'")
        limit = sb.execute("cat /sys/fs/cgroup/memory.max 2>/dev/null || "
                           "cat /sys/fs/cgroup/memory/memory.limit_in_bytes")
    assert hog.exit_code == 137 and "allocated" not in hog.output  # killed by the container's memory limit
    assert small.output == "fits\n" and small.exit_code == 0
    assert int(limit.output) == 256 * MiB


def test_disk_is_bounded_to_sized_places(docker_engine: Any, docker_suites_image: str, tmp_path: Path) -> None:
    limits = Limits(file_size_bytes=MiB, tmp_bytes=MiB, var_bytes=MiB)
    with box(docker_engine, docker_suites_image, tmp_path, limits=limits) as sb:
        big = sb.execute("head -c 2000000 /dev/zero 2>&1 > big.bin; echo rc=$?; stat -c %s big.bin")
        tmp = sb.execute("exec 2>&1; cd /tmp && for i in 1 2 3; do head -c 500000 /dev/zero > f$i || echo full; done; "
                         "df -k /tmp /var/tmp /run | tail -3")
        var = sb.execute("head -c 900000 /dev/zero > /var/tmp/a && head -c 900000 /dev/zero > /var/tmp/b; echo rc=$?")
        root = sb.execute("head -c 1000 /dev/zero > /opt/x; head -c 1000 /dev/zero > /var/lib/x; echo rc=$?")
    assert big.output.splitlines() == ["head: error writing 'standard output': File too large", "rc=1", str(MiB)]
    assert "full" in tmp.output
    assert [line.split()[1] for line in tmp.output.splitlines()[-3:]] == ["1024", "1024", "1024"]  # 1 MiB each
    assert "rc=1" in var.output
    assert "/opt/x: Read-only file system" in root.output and "/var/lib/x: Read-only file system" in root.output


def test_no_network(docker_engine: Any, docker_suites_image: str, tmp_path: Path) -> None:
    with box(docker_engine, docker_suites_image, tmp_path) as sb:
        r = sb.execute("ls /sys/class/net; python3 -c 'import urllib.request as u; "
                       "u.urlopen(\"http://1.1.1.1\", timeout=3)' 2>&1 | tail -1")
    assert r.output.splitlines()[0] == "lo"
    assert "Network is unreachable" in r.output.splitlines()[-1]


def test_the_project_and_the_host_are_out_of_sight(docker_engine: Any, docker_suites_image: str,
                                                   tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "trials" / "other").mkdir(parents=True)
    (run_dir / "trials" / "other" / "result.json").write_text("HOST-CANARY")
    config = SandboxConfig(kind="docker", workspace=run_dir / "trials" / "mine" / "workspace",
                           image=docker_suites_image)
    with DockerSandbox(config, client=docker_engine) as sb:
        r = sb.execute("python3 -c 'import unscaffold' 2>&1 | tail -1; "
                       "python3 -c 'import openpyxl, rdkit, numpy; print(\"libs ok\")'; "
                       f"ls {ROOT}/unscaffold 2>&1; cat {run_dir}/trials/other/result.json 2>&1; ls /home /root 2>&1")
    lines = r.output.splitlines()
    assert lines[:3] == ["ModuleNotFoundError: No module named 'unscaffold'", "libs ok",
                         f"ls: cannot access '{ROOT}/unscaffold': No such file or directory"]
    assert "HOST-CANARY" not in r.output
    assert lines[3] == f"cat: {run_dir}/trials/other/result.json: No such file or directory"


# ---------------------------------------------------------------- the oracle through the docker sandbox

SUITE_SAMPLES = {
    "spreadsheet": ["staff-codes-1", "budget-formulas-0"],
    "appworld_lite": ["settle_requests-0_1", "note_fact-2_1"],
    "retrosynthesis": ["rxn-003", "rxn-006"],
}


@pytest.mark.parametrize("suite", sorted(SUITE_SAMPLES))
def test_oracle_passes_every_builtin_suite(suite: str, docker_suites_image: str, tmp_path: Path) -> None:
    ids = SUITE_SAMPLES[suite]
    summary = run(RunConfig(suite=suite, student="oracle", task_ids=ids, out=tmp_path, sandbox={"kind": "docker"}))
    assert summary.per_task == {t: 1.0 for t in ids}
    assert result_of(tmp_path, ids[0])["isolation"].startswith(f"docker container from image {docker_suites_image}")


def test_oracle_passes_the_example_harbor_tasks(docker_suites_image: str, tmp_path: Path) -> None:
    summary = run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student="oracle", out=tmp_path,
                            sandbox={"kind": "docker"}))
    assert summary.pass_at_1 == 100.0 and summary.n_tasks == 4
    assert summary.outcomes == {"passed": 4}


def test_a_task_dockerfile_is_built_on_a_substitute_base(base_image: str, tmp_path: Path) -> None:
    """RUN (an apt install), WORKDIR, COPY and ENV of the task's Dockerfile all reach the trial; the record
    names the substitute for the FROM that no registry serves."""
    summary = run(RunConfig(suite="harbor", data=HARBOR_DOCKER_EXAMPLES, student="oracle", out=tmp_path,
                            sandbox={"kind": "docker", "base_images": [f"debian:bookworm-slim={base_image}"],
                                     "keep_workspace": True}))  # read below; else dropped with the trial's disk
    assert summary.per_task == {"warehouse-value": 1.0}
    result = result_of(tmp_path, "warehouse-value")
    assert f"(substitute base {base_image} for debian:bookworm-slim)" in result["isolation"]
    workspace = tmp_path / "trials" / "warehouse-value" / "workspace"
    assert (workspace / "value.txt").read_text() == "622.73 EUR\n"
    assert (workspace / "data" / "inventory.json").is_file()  # COPY into the WORKDIR, seeded into the workspace


def test_an_unpullable_from_without_a_substitute_says_how_to_map_it(docker_engine: Any, tmp_path: Path) -> None:
    if images.pull_problem(docker_engine, "debian:bookworm-slim") is None:
        pytest.skip("debian:bookworm-slim is available here: nothing to substitute")
    summary = run(RunConfig(suite="harbor", data=HARBOR_DOCKER_EXAMPLES, student="oracle", out=tmp_path,
                            sandbox={"kind": "docker"}, infra_retries=0))
    assert summary.outcomes == {"infra_error": 1}
    reason = result_of(tmp_path, "warehouse-value")["reason"]
    dockerfile = HARBOR_DOCKER_EXAMPLES / "warehouse-value" / "environment" / "Dockerfile"
    assert reason.startswith(f"SandboxUnavailable: {dockerfile}: FROM debian:bookworm-slim cannot be pulled (")
    assert reason.endswith("); map it to a local image with --base-image debian:bookworm-slim=LOCAL_IMAGE "
                           "(`unscaffold image base` makes one)")


def test_exec_runs_unprivileged_in_the_suites_image(docker_suites_image: str) -> None:
    from typer.testing import CliRunner

    from unscaffold.cli import app

    result = CliRunner().invoke(app, ["exec", "--sandbox", "docker", "--", "id -u; grep CapEff /proc/self/status"])
    assert result.exit_code == 0, result.output
    uid, capabilities, exit_line = result.stdout.splitlines()[:3]
    assert int(uid) != 0
    assert (capabilities, exit_line) == ("CapEff:\t0000000000000000", "")
