"""What a killed process leaves (its uid registry entries, its sandboxes' cgroups and their processes, its
trial filesystems) is cleaned by the next process, told stale by its owner's pid and start time.

Each test keeps a registry and a cgroup name prefix of its own, so nothing of another process of this host
is looked at."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers import eventually
from unscaffold.minimal_harness.sandbox import disk, identity, owner
from unscaffold.minimal_harness.sandbox.cgroup import SandboxCgroup

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="uids and cgroups are the sandbox's only as root")

# A process that takes a uid and a cgroup as a sandbox does, puts a process in the group, and waits to be killed.
HOLDER = """
import subprocess, sys, time
from pathlib import Path
from unscaffold.minimal_harness.sandbox import identity
from unscaffold.minimal_harness.sandbox.cgroup import SandboxCgroup
identity.REGISTRY, identity.CGROUP_PREFIX = Path(sys.argv[1]), sys.argv[2]
uid = identity.allocate_uid()
group = SandboxCgroup.create(f"{identity.CGROUP_PREFIX}{uid}", 64, 1 << 30)
child = subprocess.Popen(["sleep", "1000"], start_new_session=True)
for procs in (group.procs_files() if group else []):
    Path(procs).write_text(str(child.pid))
print(uid, child.pid, int(group is not None), flush=True)
time.sleep(1000)
"""


def dead_token() -> str:
    """The token of a process that has ended."""
    proc = subprocess.Popen(["true"])
    token = owner.token(proc.pid)
    proc.wait()
    return token


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def test_tokens_tell_a_live_owner_from_a_dead_one() -> None:
    assert owner.alive(owner.token())
    token = dead_token()
    assert not owner.alive(token)
    pid = token.split(".")[0]
    assert not owner.alive(f"{os.getpid()}.{int(owner.token().split('.')[1]) + 1}")  # same pid, another start
    assert owner.alive("not-a-token")  # an owner that cannot be read is never taken as gone
    assert owner.alive(str(os.getpid())) and not owner.alive(pid)  # a bare pid, as older versions wrote


@needs_root
def test_a_killed_holder_leaves_its_uid_cgroup_and_process_and_the_next_process_reclaims_them(
        tmp_path: Path) -> None:
    registry, prefix = tmp_path / "uids", f"unscaffoldtest{os.getpid()}-"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(registry), prefix], stdout=subprocess.PIPE,
                              text=True, cwd=Path(__file__).parent.parent)
    assert holder.stdout is not None
    uid_text, pid_text, grouped = holder.stdout.readline().split()
    uid, sleeper = int(uid_text), int(pid_text)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert not owner.alive(os.readlink(registry / uid_text))
    if grouped == "1":
        assert SandboxCgroup.leftovers(prefix) == [f"{prefix}{uid}"]
    assert identity.reclaim_stale(registry, prefix) == [uid]
    assert not os.path.lexists(registry / uid_text)
    assert SandboxCgroup.leftovers(prefix) == []
    if grouped == "1":  # the group's process was ended with it
        assert gone(sleeper)
    else:
        os.kill(sleeper, signal.SIGKILL)


@needs_root
def test_live_unknown_and_still_running_uids_stay_taken(tmp_path: Path) -> None:
    registry = tmp_path / "uids"
    registry.mkdir()
    os.symlink(owner.token(), registry / "1700000001")  # this process: alive
    (registry / "1700000002").mkdir()  # an older version's entry: owner unknown
    os.symlink(dead_token(), registry / "1700000003")  # dead owner, but a process still runs as the uid
    os.symlink(dead_token(), registry / "1700000004")  # dead owner, nothing left
    runner = subprocess.Popen(["sleep", "1000"], user=1700000003)
    try:
        assert identity.reclaim_stale(registry, f"unscaffoldtest{os.getpid()}-") == [1700000004]
    finally:
        runner.kill()
        runner.wait()
    assert sorted(os.listdir(registry)) == ["1700000001", "1700000002", "1700000003"]
    assert identity.reclaim_stale(registry, f"unscaffoldtest{os.getpid()}-") == [1700000003]


@needs_root
def test_a_uid_whose_processes_have_exited_but_wait_to_be_reaped_is_reclaimed(tmp_path: Path) -> None:
    """A killed run's sandbox processes end at once, but stay in the process table (zombies, still named by
    their uid) until their new parent, the host's init, reaps them, which a busy host does late: they run
    no more and hold nothing, so they keep no uid taken."""
    registry = tmp_path / "uids"
    registry.mkdir()
    os.symlink(dead_token(), registry / "1700000021")
    exited = subprocess.Popen(["true"], user=1700000021)  # not waited for: a zombie until `wait` below
    try:
        assert eventually(lambda: gone(exited.pid))
        assert os.stat(f"/proc/{exited.pid}").st_uid == 1700000021  # still listed, as the uid
        assert identity.reclaim_stale(registry, f"unscaffoldtest{os.getpid()}-") == [1700000021]
    finally:
        exited.wait()
    assert os.listdir(registry) == []


@needs_root
def test_a_group_with_no_live_holder_is_ended_and_one_with_a_live_holder_is_kept(tmp_path: Path) -> None:
    registry, prefix = tmp_path / "uids", f"unscaffoldtest{os.getpid()}-"
    registry.mkdir()
    os.symlink(owner.token(), registry / "1700000011")
    kept = SandboxCgroup.create(f"{prefix}1700000011", 64, 1 << 30)
    orphan = SandboxCgroup.create(f"{prefix}1700000012", 64, 1 << 30)  # no entry at all
    if kept is None or orphan is None:
        pytest.skip("no cgroup can be made here")
    sleeper = subprocess.Popen(["sleep", "1000"])
    try:
        for procs in orphan.procs_files():
            Path(procs).write_text(str(sleeper.pid))
        assert identity.reclaim_stale(registry, prefix) == []
        assert SandboxCgroup.leftovers(prefix) == [f"{prefix}1700000011"]
        assert sleeper.wait(timeout=60) == -signal.SIGKILL
    finally:
        sleeper.kill()
        kept.remove()


@needs_root
def test_a_trial_filesystem_of_a_dead_owner_is_removed_and_a_live_ones_kept(monkeypatch: pytest.MonkeyPatch,
                                                                             tmp_path: Path) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / f"unscaffold-disk-{dead_token()}-abc"
    live = tmp_path / f"unscaffold-disk-{owner.token()}-abc"
    reused = tmp_path / f"unscaffold-disk-{os.getpid()}.1-abc"  # this pid, but another process's start
    for folder in (dead, live, reused):
        (folder / "mnt").mkdir(parents=True)
    monkeypatch.setattr(disk, "_swept", [])
    disk._sweep()
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name]


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def uid_processes(uid: int) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.stat(entry.path).st_uid == uid and not gone(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


# `unscaffold` with a registry, a cgroup prefix (and, through TMPDIR, a trial-filesystem folder) of its own, so
# no other process of this host reclaims what it leaves before the test looks: on a host where other runs
# start, each one's first sandbox reclaims every stale uid, group and filesystem it can see.
OWN_RUN = """
import sys
from pathlib import Path
from unscaffold.minimal_harness.sandbox import identity, local
identity.REGISTRY, identity.CGROUP_PREFIX = Path(sys.argv[1]), sys.argv[2]
local.CGROUP_PREFIX = sys.argv[2]
from unscaffold.cli import main
sys.argv = ["unscaffold", *sys.argv[3:]]
main()
"""


@needs_root
def test_a_run_killed_mid_command_leaves_its_uid_and_cgroup_and_the_next_process_reclaims_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers import ROOT, call, final
    from tests.test_hostile_runs import HONEST_VERIFIER, harbor_task

    registry, prefix, temp = tmp_path / "uids", f"unscaffoldtest{os.getpid()}-", tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    harbor_task(tmp_path / "tasks", "t", HONEST_VERIFIER)
    replay = tmp_path / "replay.json"
    replay.write_text(json.dumps({"t": [call("sleep 1000"), final("done")]}))
    proc = subprocess.Popen([sys.executable, "-c", OWN_RUN, str(registry), prefix, "run", "harbor", "--data",
                             str(tmp_path / "tasks"), "--student", f"replay:{replay}", "--out", str(tmp_path / "run")],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "TMPDIR": str(temp)})
    held: list[int] = []

    def sleeping() -> bool:
        """The run holds a uid and its command runs as it."""
        held[:] = [int(n) for n in (os.listdir(registry) if registry.is_dir() else []) if n.isdigit()]
        return len(held) == 1 and any(b"sleep\x001000" in cmdline(pid) for pid in uid_processes(held[0]))

    try:
        assert eventually(sleeping, timeout_s=120)
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # the run only: what it started is left as a crash leaves it
        proc.wait()
    try:
        uid = held[0]
        group = f"{prefix}{uid}"
        assert os.readlink(registry / str(uid)).split(".")[0] == str(proc.pid)
        assert SandboxCgroup.leftovers(prefix) == [group]
        assert identity.reclaim_stale(registry, prefix) == [uid]
        assert os.listdir(registry) == []
        assert SandboxCgroup.leftovers(prefix) == []
        assert uid_processes(uid) == []
        assert disk.mounts_below(tmp_path / "run") != []  # its trial filesystem, still shown in the trial folder
        assert list(temp.glob(f"unscaffold-disk-{proc.pid}.*"))
        disk._swept.clear()
        disk._sweep()
        assert disk.mounts_below(tmp_path / "run") == []
        assert not list(temp.glob(f"unscaffold-disk-{proc.pid}.*"))
    finally:  # nothing of the killed run stays mounted, whatever failed above
        disk._swept.clear()
        disk._sweep()
        for name in SandboxCgroup.leftovers(prefix):
            if (left := SandboxCgroup.existing(name)) is not None:
                left.kill_all()
                left.remove()
