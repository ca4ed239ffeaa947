"""A hostile student inside the local sandbox: no privilege, no project, no host, bounded resources."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, needs_bwrap
from unscaffold.minimal_harness.sandbox import SandboxConfig, open_sandbox
from unscaffold.minimal_harness.sandbox.base import Limits

pytestmark = needs_bwrap


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
    fork_bomb = ("import os, time\n"
                 "made = refused = 0\n"
                 "for _ in range(100):\n"
                 "    try:\n"
                 "        pid = os.fork()\n"
                 "    except BlockingIOError:\n"
                 "        refused += 1\n"
                 "        continue\n"
                 "    if pid == 0:\n"
                 "        time.sleep(20); os._exit(0)\n"
                 "    made += 1\n"
                 "print(made, refused, len([p for p in os.listdir('/proc') if p.isdigit()]))\n")
    try:
        (tmp_path / "ws" / "bomb.py").write_text(fork_bomb)
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
        r = sandbox.execute("id -u; echo more >> seed.txt && echo appended")
        uid = int(r.output.splitlines()[0])
    finally:
        sandbox.close()
    assert uid >= 1_610_000_000 and r.output.endswith("appended\n")
    assert (ws / "seed.txt").stat().st_uid == uid
