"""A hostile student inside the local sandbox: no privilege, no project, no host, bounded resources."""

from __future__ import annotations

import gc
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import FORK_BOMB, ROOT, needs_bwrap
from unscaffold.errors import SandboxUnavailable
from unscaffold.minimal_harness.sandbox import SandboxConfig, identity, open_sandbox
from unscaffold.minimal_harness.sandbox.base import Limits
from unscaffold.minimal_harness.sandbox.identity import REGISTRY

pytestmark = needs_bwrap

# A daemon that outlives its command: hundreds of idle processes as cover, and two chains in which every
# process forks its successor and exits at once, so a kill that lists processes and then kills them
# finds a chain's pid already gone (in C, a generation lives well under the time such a pass takes;
# against three such passes one trial in six kept a chain alive). Once the tests are copied in it
# rewrites them (reward 1 without solving), and it keeps swapping a workspace folder for a link to a
# host folder, so a host that walks the workspace by path as root gives the host's files away.
FORK_CHAIN = r"""#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
    for (int i = 0; i < 900; i++)
        if (fork() == 0) { sleep(1000); _exit(0); }
    for (int i = 0; i < 1; i++)
        if (fork() == 0) break;
    for (;;) {
        if (fork() > 0) _exit(0);
        if (access("/tests/test.sh", F_OK) == 0 && access("/tests/.done", F_OK) != 0) {
            int fd = open("/tests/.new", O_WRONLY | O_CREAT | O_TRUNC, 0755);
            if (fd >= 0 && write(fd, "echo 1 > /logs/verifier/reward.txt\n", 36) == 36 && close(fd) == 0
                && rename("/tests/.new", "/tests/test.sh") == 0)
                close(open("/tests/.done", O_WRONLY | O_CREAT, 0644));
        }
        mkdir("sub", 0755);
        if (rename("sub", "sub.old") == 0) {
            symlink("VICTIM", "sub");
            unlink("sub");
            rename("sub.old", "sub");
        }
    }
}
"""
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="the fork chain is compiled with gcc")


def test_no_capabilities_and_not_root(box) -> None:
    r = box.execute("grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status; id -u")
    lines = r.output.splitlines()
    assert lines[:3] == ["CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "NoNewPrivs:\t1"]
    assert lines[3] != "0"


def test_read_only_binds_stay_read_only(tmp_path: Path) -> None:
    from unscaffold.minimal_harness.sandbox import Mount

    (tmp_path / "task").mkdir()
    config = SandboxConfig(kind="local", workspace=tmp_path / "ws", mounts=[Mount(source=tmp_path / "task",
                                                                                  target="/task")])
    sandbox = open_sandbox(config)
    try:
        r = sandbox.execute("mount -o remount,bind,rw /task; mount -t tmpfs none /task; touch /task/x; "
                            "mknod /tmp/null2 c 1 3; chattr +i /tmp 2>&1; echo done")
    finally:
        sandbox.close()
    assert r.output.count("must be superuser to use mount") == 2
    assert "touch: cannot touch '/task/x': Read-only file system" in r.output
    assert "mknod: /tmp/null2: Operation not permitted" in r.output
    assert r.output.endswith("done\n")
    assert list((tmp_path / "task").iterdir()) == []


def test_process_limit_holds(tmp_path: Path) -> None:
    config = SandboxConfig(kind="local", workspace=tmp_path / "ws", limits=Limits(processes=40), timeout_s=30)
    sandbox = open_sandbox(config)
    try:
        (tmp_path / "ws" / "bomb.py").write_text(FORK_BOMB)
        r = sandbox.execute("python3 bomb.py")
    finally:
        sandbox.close()
    made, refused, running = map(int, r.output.split())
    assert made + refused == 100 and refused >= 60
    assert running <= 41  # the sandbox user's 40 at most, plus bubblewrap's init: never the 100 asked for


def test_private_tmp_has_a_size(tmp_path: Path) -> None:
    config = SandboxConfig(kind="local", workspace=tmp_path / "ws", limits=Limits(tmp_bytes=1024 * 1024))
    sandbox = open_sandbox(config)
    try:
        r = sandbox.execute("head -c 2000000 /dev/zero > /tmp/fill; echo rc=$?; df -k /tmp | tail -1")
    finally:
        sandbox.close()
    assert "No space left on device" in r.output and "rc=1" in r.output
    assert r.output.split()[-5] == "1024"  # the tmpfs is 1 MiB


def test_the_project_cannot_be_imported_but_the_suites_libraries_can(box) -> None:
    r = box.execute("python3 -c 'import unscaffold' 2>&1 | tail -1; "
                    "python3 -c 'import openpyxl, rdkit, pydantic; print(\"libs ok\")'")
    assert r.output == "ModuleNotFoundError: No module named 'unscaffold'\nlibs ok\n"


def test_host_folders_and_the_run_folder_are_out_of_sight(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "trials" / "other").mkdir(parents=True)
    (run / "trials" / "other" / "result.json").write_text("HOST-CANARY")
    sandbox = open_sandbox(SandboxConfig(kind="local", workspace=run / "trials" / "mine" / "workspace"))
    try:
        r = sandbox.execute(f"ls /root /home {run}/trials 2>&1; cat {run}/trials/other/result.json 2>&1; "
                            f"ls {ROOT}/unscaffold 2>&1 | head -1")
    finally:
        sandbox.close()
    assert "HOST-CANARY" not in r.output
    root_home = [p.name for p in Path("/root").iterdir() if p.name != ".pyenv"]  # the interpreter may live there
    assert not any(name in r.output.split() for name in root_home)
    assert "ls: cannot access '/home': No such file or directory" in r.output
    assert f"ls: cannot access '{ROOT}/unscaffold': No such file or directory" in r.output


def test_a_lower_hard_memory_limit_on_the_host_still_starts_sandboxes(tmp_path: Path) -> None:
    script = ("from pathlib import Path; from unscaffold.minimal_harness.sandbox import SandboxConfig, open_sandbox; "
              f"b = open_sandbox(SandboxConfig(kind='local', workspace=Path({str(tmp_path / 'ws')!r}))); "
              "print(b.execute('ulimit -v').output, end=''); b.close()")
    limit = 6_000_000_000
    r = subprocess.run(["prlimit", f"--as={limit}:{limit}", sys.executable, "-c", script], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.strip()) * 1024 <= limit  # `ulimit -v` is in KiB: lowered to the host's hard limit


def test_workspace_is_handed_to_the_sandbox_user_and_back_to_nobody_else(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("uids are switched only when the host runs as root")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "seed.txt").write_text("seed")
    sandbox = open_sandbox(SandboxConfig(kind="local", workspace=ws))
    try:
        r = sandbox.execute("id -u; echo more >> seed.txt && echo appended; touch made.txt")
        uid = int(r.output.splitlines()[0])
        during = {p.name: p.stat().st_uid for p in ws.iterdir()}
    finally:
        sandbox.close()
    assert uid >= 1_610_000_000 and r.output.endswith("appended\n")
    assert during == {"seed.txt": uid, "made.txt": uid}
    # Closed: the uid owns nothing left behind, so it can be given out again.
    assert {p.name: (p.stat().st_uid, p.stat().st_gid) for p in ws.iterdir()} == {"seed.txt": (0, 0),
                                                                                  "made.txt": (0, 0)}
    assert not os.path.lexists(REGISTRY / str(uid))


def test_no_new_user_namespace_and_no_inheritable_capability(box) -> None:
    r = box.execute("unshare -r true; echo rc=$?; unshare --user --net true; echo rc=$?; "
                    "grep -E '^Cap(Inh|Amb|Bnd)' /proc/self/status")
    assert r.output == ("unshare: unshare failed: No space left on device\nrc=1\n"
                        "unshare: unshare failed: No space left on device\nrc=1\n"
                        "CapInh:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\n")


def test_hand_over_follows_no_link_swapped_in(tmp_path: Path, monkeypatch) -> None:
    """A folder replaced by a link to a host folder while the host walks the workspace as root: the
    walk goes through folder handles, so the kernel refuses the link instead of following it."""
    if os.geteuid() != 0:
        pytest.skip("owners are changed only when the host runs as root")
    victim, ws = tmp_path / "victim", tmp_path / "ws"
    (victim / "inner").mkdir(parents=True)
    (victim / "inner" / "host.txt").write_text("host")
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "f.txt").write_text("mine")
    real_stat = os.stat

    def stat_then_swap(name, *args, **kwargs):  # the swap lands after `sub` was seen to be a folder
        result = real_stat(name, *args, **kwargs)
        if name == "sub" and not (ws / "sub").is_symlink():
            (ws / "sub").rename(ws / "sub.old")
            (ws / "sub").symlink_to(victim)
        return result

    monkeypatch.setattr(identity.os, "stat", stat_then_swap)
    identity.chown_tree(ws, 1_610_000_123, 1_610_000_123)
    assert {(p.lstat().st_uid, p.lstat().st_gid) for p in [victim, *victim.rglob("*")]} == {(0, 0)}
    assert (ws / "sub").is_symlink() and (ws / "sub").lstat().st_uid == 0  # swapped in after its turn
    assert (ws / "sub.old").lstat().st_uid == 1_610_000_123  # the folder, handed over before the swap
    assert (ws / "sub.old" / "f.txt").stat().st_uid == 0  # moved out of the walk's way: not entered


def test_a_sandbox_leaves_no_cgroup_behind(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("cgroups are made only when the host runs as root")
    sandbox = open_sandbox(SandboxConfig(kind="local", workspace=tmp_path / "ws"))
    sandbox.execute("sleep 1000 & echo started")
    groups = list(sandbox.cgroup.groups)
    assert "a cgroup per sandbox ends every process a command left (pids limit and memory limit)" in sandbox.isolation
    assert groups and all(g.is_dir() for g in groups)
    sandbox.close()
    assert [g for g in groups if g.exists()] == []


def test_a_server_never_starts_beside_processes_that_would_not_end(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A process that outlived the sweep of a server that hung is not taken for the next server's own (kept,
    never swept again, running beside the student): the sandbox refuses to start, and says why."""
    if os.geteuid() != 0:
        pytest.skip("cgroups are made only when the host runs as root")
    sandbox = open_sandbox(SandboxConfig(kind="local", workspace=tmp_path / "ws"))
    left = subprocess.Popen(["sleep", "1000"])
    try:
        assert sandbox.execute("echo ready").output == "ready\n"
        sweep = sandbox.cgroup.kill_all
        sandbox._stop()  # the server is gone, as after a command that hung
        for procs in sandbox.cgroup.procs_files():
            Path(procs).write_text(str(left.pid))
        monkeypatch.setattr(sandbox.cgroup, "kill_all", lambda: False)  # a process that will not end
        with pytest.raises(SandboxUnavailable) as raised:
            sandbox.execute("echo again")
        assert str(raised.value) == "processes an earlier command left in the sandbox would not end"
        assert left.poll() is None and sandbox._keep is None
        monkeypatch.setattr(sandbox.cgroup, "kill_all", sweep)
        assert sandbox.execute("echo again").output == "again\n" and left.wait(timeout=10) == -9
    finally:
        left.kill()
        sandbox.close()


@needs_gcc
def test_a_fork_chain_is_gone_before_the_next_command(tmp_path: Path) -> None:
    """Twenty daemons in a row: after each, the sandbox holds only its own processes again (bubblewrap's
    init, the inner bubblewrap, the server, and the command counting them)."""
    ws = tmp_path / "ws"
    sandbox = open_sandbox(SandboxConfig(kind="local", workspace=ws))
    try:
        (ws / "chain.c").write_text(FORK_CHAIN.replace("VICTIM", str(tmp_path / "victim")))
        assert sandbox.execute("gcc -O2 -w -o chain chain.c && echo built").output == "built\n"
        count = "python3 -c \"import os; print(sum(p.isdigit() for p in os.listdir('/proc')))\""
        counts = [sandbox.execute(count).output]
        for _ in range(20):
            sandbox.execute("setsid ./chain > /dev/null 2>&1 & sleep 0.5")
            counts.append(sandbox.execute(count).output)
    finally:
        sandbox.close()
    assert counts == ["4\n"] * 21


def test_without_root_each_command_gets_a_pid_namespace_that_ends_with_it() -> None:
    """The fallback without a cgroup, as an ordinary user (root tries it as `nobody`): each command runs
    in a pid namespace of its own, so whatever it left, even in a new session, ends with it; and it can
    make no user namespace."""
    from unscaffold.minimal_harness.sandbox.shell_server import command_namespace_argv

    command = command_namespace_argv("bwrap") + [
        "bash", "-c", "setsid sleep 1000 > /dev/null 2>&1 & (sleep 1000 &); unshare -r true; echo started"]
    script = f"{shlex.join(command)} 2>&1; sleep 0.5; ls /proc | grep -c '^[0-9]'"
    argv = ["bwrap", "--unshare-user", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
            "--unshare-pid", "--", "bash", "-c", script]
    if os.geteuid() == 0:
        argv = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", *argv]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    # Left in the sandbox: bubblewrap's init, this bash, `ls` and `grep`; neither sleep.
    assert r.stdout == "unshare: unshare failed: No space left on device\nstarted\n4\n", r.stderr


def test_a_sandbox_dropped_without_close_gives_back_its_cgroup_and_uid(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("cgroups and uids are taken only when the host runs as root")
    sandbox = open_sandbox(SandboxConfig(kind="local", workspace=tmp_path / "ws"))
    sandbox.execute("sleep 1000 & echo started")
    groups, uid = list(sandbox.cgroup.groups), sandbox.uid
    del sandbox
    gc.collect()
    assert [g for g in groups if g.exists()] == [] and not os.path.lexists(REGISTRY / str(uid))
