"""The bubblewrap sandbox keeps hostile commands in: each escape below must fail."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import eventually, needs_bwrap
from unscaffold.errors import SandboxUnavailable
from unscaffold.minimal_harness.sandbox import SandboxConfig, open_sandbox
from unscaffold.minimal_harness.sandbox.local import INSTALL_HINT, LocalSandbox, bwrap_argv
from unscaffold.minimal_harness.sandbox.output import HEAD_CHARS, TAIL_CHARS

pytestmark = needs_bwrap


def test_workspace_is_writable_and_is_the_working_directory(box, tmp_path: Path) -> None:
    r = box.execute("pwd && echo data > out.txt && cat out.txt")
    assert r.observation() == f"{tmp_path / 'ws'}\ndata\n\n[exit_code=0]"
    assert (tmp_path / "ws" / "out.txt").read_text() == "data\n"


def test_writing_outside_the_workspace_fails(box, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    r = box.execute(f"echo pwned > {outside}; echo pwned > /etc/unscaffold-pwned; echo $?")
    assert "Read-only file system" in r.output
    assert not outside.exists()
    assert not Path("/etc/unscaffold-pwned").exists()


def test_tmp_is_private_to_the_trial(box, tmp_path: Path) -> None:
    marker = f"/tmp/unscaffold-private-{os.getpid()}"
    box.execute(f"echo secret > {marker}")
    assert not Path(marker).exists()
    assert box.execute(f"cat {marker}").output == "secret\n"  # one /tmp for the trial
    other = open_sandbox(SandboxConfig(kind="local", workspace=tmp_path / "other"))
    try:
        assert other.execute(f"cat {marker}").exit_code == 1  # not shared with another trial
    finally:
        other.close()


def test_a_command_that_kills_the_shell_server_only_ends_itself(box) -> None:
    r = box.execute("kill -9 $PPID; sleep 5")
    assert r.exit_code == 137
    assert r.output == "[the sandbox shell died during the command]"
    assert box.execute("echo back").output == "back\n"


def test_setsid_escape_is_killed_too(box) -> None:
    tag = f"unscaffold-setsid-{os.getpid()}-{time.time_ns()}"
    box.execute(f"setsid bash -c 'exec -a {tag} sleep 1000' > /dev/null 2>&1 & echo ok")
    assert eventually(lambda: tag not in _host_processes())


def test_cwd_and_environment_do_not_persist(box) -> None:
    box.execute("mkdir sub && cd sub && export FOO=bar")
    r = box.execute('pwd; echo "FOO=${FOO:-unset}"')
    assert r.output.splitlines()[1] == "FOO=unset"
    assert not r.output.splitlines()[0].endswith("/sub")


def test_loopback_listener_unreachable_without_network(box) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(server.accept()[0]), daemon=True).start()
    try:
        connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('CONNECTED')"
        r = box.execute(f'python3 -c "{connect}"')
        assert "CONNECTED" not in r.output
        assert r.exit_code == 1
        assert "ConnectionRefusedError" in r.output or "OSError" in r.output
        assert accepted == []
    finally:
        server.close()


def test_network_flag_allows_loopback(tmp_path: Path) -> None:
    config = SandboxConfig(kind="local", workspace=tmp_path / "ws", network=True)
    assert "--unshare-net" not in bwrap_argv(config, ["true"])
    assert "--unshare-net" in bwrap_argv(config.model_copy(update={"network": False}), ["true"])


def test_background_job_is_gone_when_the_command_returns(box) -> None:
    tag = f"unscaffold-bg-{os.getpid()}-{time.time_ns()}"
    r = box.execute(f"bash -c 'exec -a {tag} sleep 1000' & echo started")
    assert r.output == "started\n"
    assert eventually(lambda: tag not in _host_processes())


def test_timeout_returns_and_kills_grandchildren(box) -> None:
    """The command would sleep 1000 s: it returning at all, marked timed out, is the timeout working."""
    tag = f"unscaffold-gc-{os.getpid()}-{time.time_ns()}"
    r = box.execute(f"bash -c 'bash -c \"exec -a {tag} sleep 1000\" & wait'", timeout_s=2)
    assert r.timed_out and r.exit_code == 124
    assert "[command timed out after 2 s; its process group was killed]" in r.output
    assert eventually(lambda: tag not in _host_processes())


def test_fifty_megabytes_of_output_is_truncated(box) -> None:
    r = box.execute("head -c 50000000 /dev/zero | tr '\\0' 'x'; echo; echo END")
    assert r.exit_code == 0
    assert r.elided_chars == 50_000_005 - HEAD_CHARS - TAIL_CHARS
    assert f"\n[... {r.elided_chars} characters elided ...]\n" in r.output
    assert len(r.output) < HEAD_CHARS + TAIL_CHARS + 100
    assert r.output.startswith("x" * HEAD_CHARS + "\n[... ")
    assert r.output.endswith("x\nEND\n")


def test_rlimits_cap_file_size(tmp_path: Path) -> None:
    config = SandboxConfig(kind="local", workspace=tmp_path / "ws")
    config.limits.file_size_bytes = 1024 * 1024
    sandbox = open_sandbox(config)
    r = sandbox.execute("head -c 2000000 /dev/zero > big.bin; echo rc=$?; stat -c %s big.bin")
    assert "File size limit exceeded" in r.output
    assert r.output.strip().endswith("1048576")


def test_pipes_end_with_sigpipe_as_in_a_terminal(box) -> None:
    r = box.execute("yes | head -n 2; echo ${PIPESTATUS[0]}")
    assert r.output == "y\ny\n141\n"  # 128 + SIGPIPE, not an error message from `yes`


def test_pid_namespace_hides_host_processes(box) -> None:
    r = box.execute("ls /proc | grep -E '^[0-9]+$' | wc -l")
    assert int(r.output.strip()) < 10


def test_project_python_is_first_on_path(box) -> None:
    r = box.execute("python3 -c 'import openpyxl, pydantic; print(\"ok\")'")
    assert r.output == "ok\n"


def test_missing_bwrap_says_how_to_install(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(SandboxUnavailable) as err:
        LocalSandbox(SandboxConfig(kind="local", workspace=tmp_path))
    assert str(err.value) == INSTALL_HINT
    assert "apt-get install -y bubblewrap" in str(err.value)


def test_workspace_appears_at_workdir_with_extra_mounts(tmp_path: Path) -> None:
    from unscaffold.minimal_harness.sandbox import Mount

    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / "f.txt").write_text("read me")
    config = SandboxConfig(kind="local", workspace=tmp_path / "ws", workdir="/app",
                           mounts=[Mount(source=tmp_path / "ro", target="/tests")])
    sandbox = open_sandbox(config)
    r = sandbox.execute("pwd; cat /tests/f.txt; echo x > /tests/g.txt")
    assert r.output.startswith("/app\nread me")
    assert "Read-only file system" in r.output


def _host_processes() -> str:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                pass
    return "\n".join(out)


def test_a_dead_process_copy_of_the_shell_server_is_removed_and_a_live_one_kept(tmp_path: Path) -> None:
    from unscaffold.minimal_harness.sandbox.local import SERVER_COPY_PREFIX, remove_stale_server_copies

    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = tmp_path / f"{SERVER_COPY_PREFIX}{gone.pid}-abc"
    live = tmp_path / f"{SERVER_COPY_PREFIX}{os.getpid()}-def"
    other = tmp_path / f"{SERVER_COPY_PREFIX}old_style"
    for folder in (dead, live, other):
        (folder / "unscaffold").mkdir(parents=True)
    assert remove_stale_server_copies(tmp_path) == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])


@pytest.mark.skipif(os.geteuid() != 0, reason="a uid of its own is given as root")
def test_the_sandbox_user_has_a_name_in_read_only_user_files(box) -> None:
    """Programs look their user up on start: a uid the files name is found there, not by every name service."""
    uid = box.execute("id -u").output.strip()
    r = box.execute("whoami; tail -n 1 /etc/passwd; echo x >> /etc/passwd")
    assert r.output.splitlines()[:2] == ["sandbox", f"sandbox:x:{uid}:{uid}::/tmp:/bin/bash"]
    assert r.exit_code == 1 and box.execute("tail -n 1 /etc/group").output == f"sandbox:x:{uid}:\n"


def test_the_shell_server_runs_from_bytecode_made_when_its_copy_is(box) -> None:
    """Compiling the server's source at each start cost a quarter of its CPU: the copy holds it compiled,
    as bytecode trusted without a look at the source, and the server starts from that."""
    import sys

    from unscaffold.minimal_harness.sandbox.local import SERVER_SCRIPT, server_dir

    listing = box.execute("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done").output
    servers = [line.split() for line in listing.splitlines() if line.startswith(f"{sys.executable} ")]
    assert [argv[1:4] for argv in servers] == [["-I", "-S", SERVER_SCRIPT]]
    package = Path(server_dir()) / "unscaffold" / "minimal_harness" / "sandbox"
    compiled = [package / "shell_server.pyc"] + [package / "__pycache__" / f"{name}.{sys.implementation.cache_tag}.pyc"
                                                 for name in ("shell_server", "stream", "output", "result")]
    assert [int.from_bytes(path.read_bytes()[4:8], "little") for path in compiled] == [1] * 5  # unchecked hash
