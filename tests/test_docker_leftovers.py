"""The docker sandbox ends every process a command left before it returns (so before scoring), gives its
uid back only once the container is gone, and removes what a killed process left. Against the fake engine
of test_docker_sandbox, whose listed processes are real host processes: a daemon's group is a real cgroup
named after the container, as the engine's own would be."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from tests.test_docker_sandbox import FakeClient, FakeContainer, _config
from tests.test_sandbox_stale import dead_token
from unscaffold.minimal_harness.sandbox import disk, owner
from unscaffold.minimal_harness.sandbox import docker_sandbox as ds
from unscaffold.minimal_harness.sandbox.cgroup import SandboxCgroup
from unscaffold.minimal_harness.sandbox.docker_sandbox import DockerSandbox
from unscaffold.minimal_harness.sandbox.identity import REGISTRY, release_uid

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="cgroups and uids of the sandbox's own need root")


@pytest.fixture
def daemons() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Host processes standing for what commands left; any still running at the end is killed."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


def start_daemon(procs: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(["sleep", "1000"], start_new_session=True)  # its own session, as `setsid` makes
    procs.append(proc)
    return proc


@needs_root
def test_a_setsid_daemon_is_dead_when_the_command_returns(tmp_path: Path, daemons: list) -> None:
    client = FakeClient([b"started\n"])
    groups: list[SandboxCgroup] = []

    def leave_a_daemon(container_id: str) -> None:
        group = SandboxCgroup.create(f"unscaffoldtest-{container_id}", 64, 1 << 30)
        if group is None:
            pytest.skip("no cgroup can be made here")
        groups.append(group)
        daemon = start_daemon(daemons)
        for procs in group.procs_files():
            Path(procs).write_text(str(daemon.pid))
        client.containers.created[-1].extra.append(daemon.pid)

    client.api.on_exec = leave_a_daemon
    try:
        with DockerSandbox(_config(tmp_path), client=client) as sb:
            container: FakeContainer = client.containers.created[0]
            result = sb.execute("setsid bash -c 'while :; do echo 1 > /tests/test.sh; done' &", timeout_s=5)
            assert result.output == "started\n"
            assert daemons[0].wait(timeout=30) == -signal.SIGKILL  # ended before execute returned
            assert container.calls == ["pause", "unpause"] and sb.restarts == 0
            client.api.on_exec = None
            sb.execute("true")
            assert container.calls == ["pause", "unpause"]  # nothing left: no pause at all
            leave_a_daemon(container.id)  # a process that appeared between commands
            sb.hand_over_writable()  # what the scorer calls before the verifier runs
            assert daemons[1].wait(timeout=30) == -signal.SIGKILL
    finally:
        for group in groups:
            group.kill_all()
            group.remove()


def test_a_process_the_host_cannot_tell_is_the_containers_is_never_killed_and_the_container_restarts(
        tmp_path: Path, daemons: list) -> None:
    client = FakeClient()
    bystander = start_daemon(daemons)  # listed by the engine, but not in the container's cgroup here
    client.api.on_exec = lambda container_id: client.containers.created[-1].extra.append(bystander.pid)
    with DockerSandbox(_config(tmp_path), client=client) as sb:
        sb.execute("true")
        container: FakeContainer = client.containers.created[0]
        assert container.calls == ["pause", "unpause", "restart 0"] and sb.restarts == 1
        assert bystander.poll() is None
        assert container.extra == []  # the restart ended everything of the container


@needs_root
def test_the_uid_is_released_only_once_the_container_is_gone(tmp_path: Path) -> None:
    client = FakeClient()
    client.containers.remove_error = docker.errors.APIError("device or resource busy")
    sb = DockerSandbox(_config(tmp_path), client=client)
    uid = sb.uid
    assert uid is not None and os.readlink(REGISTRY / str(uid)) == owner.token()
    sb.close()
    assert os.path.lexists(REGISTRY / str(uid))  # the container may still run as it: kept
    release_uid(uid)

    client.containers.remove_error = None
    sb = DockerSandbox(_config(tmp_path), client=client)
    uid = sb.uid
    (tmp_path / "ws" / "made.txt").write_text("x")
    sb.hand_over_writable()
    assert uid is not None and (tmp_path / "ws" / "made.txt").stat().st_uid == uid
    sb.close()
    assert not os.path.lexists(REGISTRY / str(uid))
    assert (tmp_path / "ws" / "made.txt").stat().st_uid == os.getuid()  # handed back before the release


def test_containers_of_a_dead_owner_are_removed_once_per_process(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ds, "_SWEPT", set())
    client = FakeClient()
    stale = FakeContainer({"labels": {"unscaffold": "1", ds.OWNER_LABEL: dead_token()}}, False)
    live = FakeContainer({"labels": {"unscaffold": "1", ds.OWNER_LABEL: owner.token()}}, False)
    unknown = FakeContainer({"labels": {"unscaffold": "1"}}, False)
    client.containers.existing = [stale, live, unknown]
    with DockerSandbox(_config(tmp_path), client=client):
        pass
    assert (stale.removals, live.removals, unknown.removals) == ([{"force": True}], [], [])
    with DockerSandbox(_config(tmp_path), client=client):
        pass
    assert stale.removals == [{"force": True}]


def test_isolation_says_whether_the_workspace_disk_is_bounded(tmp_path: Path) -> None:
    with DockerSandbox(_config(tmp_path), client=FakeClient()) as sb:
        assert sb.isolation.endswith(
            "every process a command left is ended after it; the workspace's disk not bounded (no filesystem of "
            "the trial's own: not root, or the engine does not share this host's mounts)")


def test_a_container_missing_its_keeper_does_not_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ds, "_SETTLE_S", 0.05)
    monkeypatch.setattr(FakeContainer, "top", lambda self: {"Titles": ["PID"], "Processes": [["7"]]})
    client = FakeClient()
    with pytest.raises(ds.SandboxUnavailable) as err:
        DockerSandbox(_config(tmp_path), client=client)
    assert str(err.value) == "the container started 1 processes, not its init and keeper"
    assert client.containers.created[0].removals == [{"force": True}]


LISTENER = """
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4)
print("ready", flush=True)
time.sleep(1000)
"""


@pytest.fixture
def engine_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Starts a stand-in engine (a process listening on a unix socket, optionally in a mount namespace of
    its own) and points DOCKER_HOST at it."""
    procs: list[subprocess.Popen[str]] = []

    def start(own_mounts: bool) -> None:
        path = tmp_path / f"engine{len(procs)}.sock"
        argv = [sys.executable, "-c", LISTENER, str(path)]
        proc = subprocess.Popen((["unshare", "-m"] if own_mounts else []) + argv, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
        disk.engine_shares_mounts.cache_clear()

    yield start
    disk.engine_shares_mounts.cache_clear()
    for proc in procs:
        proc.kill()
        proc.wait()


@needs_root
def test_the_trial_filesystem_is_used_only_where_the_engine_shares_this_hosts_mounts(
        tmp_path: Path, engine_socket: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(tmp_path)
    engine_socket(own_mounts=True)
    assert not disk.engine_shares_mounts() and disk.open_trial_disk(config) is None
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:2375")
    disk.engine_shares_mounts.cache_clear()
    assert not disk.engine_shares_mounts()
    engine_socket(own_mounts=False)
    assert disk.engine_shares_mounts()
    trial_disk = disk.open_trial_disk(config)
    if trial_disk is None:
        pytest.skip("no filesystem of the trial's own can be made here")
    try:
        with DockerSandbox(config, client=FakeClient()) as sb:
            assert sb.isolation.endswith("every process a command left is ended after it; the workspace on the "
                                         "trial's own filesystem")
            volume = f"{(tmp_path / 'ws').resolve()}:/app:rw"
            assert sb.container.kwargs["volumes"][0] == volume and os.path.ismount(tmp_path / "ws")
    finally:
        trial_disk.close()
    assert not os.path.ismount(tmp_path / "ws")
