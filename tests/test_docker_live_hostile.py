"""Against a real Docker engine: a daemon a command leaves (`setsid`) is dead before the verifier runs, so
replacing /tests/test.sh from the background earns nothing; the workspace's disk is bounded as it is
written where the engine shares this host's mounts. A uid is given back only once its container and every process
running as it are gone, also when the process that made the container was killed. Skipped, saying why,
where no engine answers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from tests.helpers import call, final
from tests.test_hostile_runs import HONEST_VERIFIER, harbor_task
from unscaffold.minimal_harness.sandbox import docker_sandbox as ds
from unscaffold.minimal_harness.sandbox import identity, owner
from unscaffold.minimal_harness.sandbox.base import SandboxConfig
from unscaffold.minimal_harness.sandbox.disk import engine_shares_mounts
from unscaffold.minimal_harness.sandbox.docker_sandbox import DockerSandbox
from unscaffold.minimal_harness.sandbox.identity import REGISTRY, release_uid
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run

pytestmark = pytest.mark.docker

# Rewrites the tests as soon as they are copied in, from a session of its own (the command's process group
# is ended with the command; this one is not in it), then returns at once.
# The replacement writes valid JSON: a daemon that survived would earn 1.0.
DAEMON = ("echo 'echo \"{\\\"reward\\\": 1}\" > /logs/verifier/reward.json' > /app/evil.sh; "
          "setsid bash -c 'while :; do cp /app/evil.sh /tests/test.sh 2>/dev/null; sleep 0.01; done' "
          "> /dev/null 2>&1 < /dev/null & echo started")


def test_a_setsid_daemon_replacing_test_sh_earns_nothing(docker_suites_image: str, tmp_path: Path,
                                                         write_replay: Any) -> None:
    harbor_task(tmp_path / "tasks", "t", HONEST_VERIFIER)
    alive = "sleep 1; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c '[w]hile :' || true"
    spec = write_replay({"t": [call(DAEMON), call(alive), final("done")]})
    summary = run(RunConfig(suite="harbor", data=tmp_path / "tasks", student=spec, out=tmp_path / "run",
                            sandbox={"kind": "docker"}))
    trial = tmp_path / "run" / "trials" / "t"
    result = json.loads((trial / "result.json").read_text())
    messages = json.loads((trial / "trajectory.json").read_text())["messages"]
    assert summary.per_task == {"t": 0.0}  # the honest verifier ran: out.txt was never written
    assert result["outcome"] == "failed" and result["details"]["source"] == "reward.json"
    assert messages[3]["content"] == "started\n\n[exit_code=0]"
    assert messages[5]["content"] == "0\n\n[exit_code=0]"  # the daemon was ended with the command that started it


def test_the_workspace_disk_is_bounded_as_it_is_written(docker_suites_image: str, tmp_path: Path,
                                                        write_replay: Any) -> None:
    if os.geteuid() != 0 or not engine_shares_mounts():
        pytest.skip("a filesystem of the trial's own needs root and an engine sharing this host's mounts")
    harbor_task(tmp_path / "tasks", "t", HONEST_VERIFIER)
    # One 6 GiB file stops at the file-size limit (2 GiB); six of 1 GiB, at the trial's 4 GiB filesystem.
    fill = ("fallocate -l 6G big 2>&1; for i in 1 2 3 4 5 6; do fallocate -l 1G part$i 2>&1 || break; done; "
            "echo reserved=$(ls part* | wc -l); rm -f big part*; echo ok > out.txt; cat out.txt")
    spec = write_replay({"t": [call(fill), final("done")]})
    summary = run(RunConfig(suite="harbor", data=tmp_path / "tasks", student=spec, out=tmp_path / "run",
                            sandbox={"kind": "docker"}))
    trial = tmp_path / "run" / "trials" / "t"
    observation = json.loads((trial / "trajectory.json").read_text())["messages"][3]["content"]
    assert observation == ("fallocate: fallocate failed: File too large\n"
                           "fallocate: fallocate failed: No space left on device\nreserved=4\nok\n\n[exit_code=0]")
    assert summary.per_task == {"t": 1.0}  # the honest work beside it still counts
    result = json.loads((trial / "result.json").read_text())
    assert result["isolation"].endswith("the workspace on the trial's own filesystem; the workspace and writable "
                                        "folders on an ext4 image of 4 GiB of their own, dropped after")


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a uid of the sandbox's own needs root")


def processes_of(uid: int) -> int:
    """How many host processes run as `uid` (any of real, effective, saved or filesystem)."""
    count = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            line = next(x for x in status.read_text().splitlines() if x.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        count += uid in {int(u) for u in line.split()[1:]}
    return count


def live_config(tmp_path: Path, image: str, name: str = "ws") -> SandboxConfig:
    return SandboxConfig(kind="docker", workspace=tmp_path / name, workdir="/app", image=image)


@needs_root
def test_the_uid_is_released_only_once_the_container_and_its_processes_are_gone(
        docker_engine: Any, docker_suites_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sb = DockerSandbox(live_config(tmp_path, docker_suites_image), client=docker_engine)
    uid, container = sb.uid, sb.container
    assert uid is not None and sb.execute("id -u").output == f"{uid}\n"
    assert processes_of(uid) == 2  # the container's init and keeper
    # The engine fails to remove it: the container still runs as the uid, which stays taken.
    monkeypatch.setattr(container, "remove", lambda **_: (_ for _ in ()).throw(docker.errors.APIError("busy")))
    sb.close()
    assert os.readlink(REGISTRY / str(uid)) == owner.token()
    assert docker_engine.containers.get(container.id).status == "running" and processes_of(uid) == 2
    monkeypatch.undo()
    container.remove(force=True)
    release_uid(uid)

    sb = DockerSandbox(live_config(tmp_path, docker_suites_image, "ws2"), client=docker_engine)
    uid, container = sb.uid, sb.container
    assert uid is not None
    seen: list[tuple[bool, int, bool]] = []  # at the moment the engine has removed it: (uid held, its processes, gone)
    remove = container.remove

    def remove_and_look(**kwargs: Any) -> None:
        remove(**kwargs)
        try:
            docker_engine.containers.get(container.id)
            gone = False
        except docker.errors.NotFound:
            gone = True
        seen.append((os.path.lexists(REGISTRY / str(uid)), processes_of(uid), gone))

    monkeypatch.setattr(container, "remove", remove_and_look)
    sb.execute("setsid sleep 1000 > /dev/null 2>&1 < /dev/null &")
    sb.close()
    assert seen == [(True, 0, True)]
    assert not os.path.lexists(REGISTRY / str(uid))


@pytest.mark.parametrize("through", ["cgroup", "engine"])
def test_a_setsid_daemon_and_a_double_fork_are_ended_after_their_command(
        docker_engine: Any, docker_suites_image: str, tmp_path: Path, through: str) -> None:
    """Both ways of ending them: through the container's cgroup from this host (root, the engine here), and
    through the engine (pause, `docker top`, kill from the host, unpause)."""
    with DockerSandbox(live_config(tmp_path, docker_suites_image), client=docker_engine) as sb:
        if through == "engine":
            sb._group = None
        elif os.geteuid() != 0:
            pytest.skip("only root may freeze the container's cgroup")
        assert sb._group is not None or through == "engine"
        left = sb.execute("setsid sleep 1001 > /dev/null 2>&1 < /dev/null & "
                          "(sleep 1002 > /dev/null 2>&1 < /dev/null &) ; echo left")
        count = sb.execute("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c 'slee[p] 100' || true")
        assert (left.output, count.output, sb.restarts) == ("left\n", "0\n", 0)
        assert {int(row[1]) for row in sb.container.top()["Processes"]} == sb._keep  # PID, after UID


OWNER = """
import sys, time
from pathlib import Path
from unscaffold.minimal_harness.sandbox.base import SandboxConfig
from unscaffold.minimal_harness.sandbox.docker_sandbox import DockerSandbox
sb = DockerSandbox(SandboxConfig(kind="docker", workspace=Path(sys.argv[1]), workdir="/app", image=sys.argv[2]))
print(sb.uid, sb.container.id, flush=True)
time.sleep(1000)
"""


@needs_root
def test_a_killed_owners_container_is_removed_and_its_uid_reclaimed_by_the_next_process(
        docker_engine: Any, docker_suites_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proc = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path / "ws"), docker_suites_image],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        words = proc.stdout.readline().split()
    finally:
        proc.send_signal(signal.SIGKILL)  # no atexit, no signal handler: the container stays
        proc.wait()
    stale_uid, stale_id = int(words[0]), words[1]
    assert docker_engine.containers.get(stale_id).status == "running" and processes_of(stale_uid) == 2
    monkeypatch.setattr(ds, "_SWEPT", set())  # as a fresh process would: sweep once more
    monkeypatch.setattr(identity, "_swept", set())
    with DockerSandbox(live_config(tmp_path, docker_suites_image, "ws2"), client=docker_engine) as sb:
        assert sb.uid != stale_uid
        with pytest.raises(docker.errors.NotFound):
            docker_engine.containers.get(stale_id)
        assert processes_of(stale_uid) == 0 and not os.path.lexists(REGISTRY / str(stale_uid))
