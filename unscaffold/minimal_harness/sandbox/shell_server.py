"""Runs inside the bubblewrap sandbox for the whole trial: one fresh `bash -c` per request.

Namespaces are built once per trial instead of once per command (bubblewrap's start-up dominates a
step otherwise), and this server imports only what a bare `python -I -S` has, since it starts once per
trial and many trials start at once. Protocol on stdin/stdout, length-prefixed (no JSON to import):
request `TIMEOUT NBYTES\\n` + command; answer `EXIT TIMED_OUT ELIDED DURATION NBYTES\\n` + output.
After every command, everything else in the pid namespace is killed, so nothing a command started
outlives it. A command can see and signal this server (same user); if it kills it, the host side
starts a new one and reports what happened."""

from __future__ import annotations

import os
import sys
import time

DEVNULL = "/dev/null"
# Python ignores SIGPIPE and SIGXFSZ; a command must get the defaults back, as subprocess gives them
# (numbers, Linux: the `signal` module is an import this server skips).
RESTORED_SIGNALS = (13, 25)


def in_private_pid_namespace() -> bool:
    """Bubblewrap's init is pid 1 and this server one of the first pids; on a host that never holds."""
    return os.getpid() <= 8 and os.getppid() == 1


def kill_others() -> None:
    me = os.getpid()
    for _ in range(3):  # a fork bomb may respawn between passes
        victims = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
        if not victims:
            return
        for pid in victims:
            try:
                os.kill(pid, 9)
            except (ProcessLookupError, PermissionError):
                pass


def run_command(command: str, timeout_s: float):  # -> ExecResult (imported lazily with the path set)
    from unscaffold.minimal_harness.sandbox.stream import watch

    start = time.monotonic()
    read_end, write_end = os.pipe()
    null = os.open(DEVNULL, os.O_RDONLY)
    actions = [(os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, write_end, 1),
               (os.POSIX_SPAWN_DUP2, write_end, 2)]
    try:
        pid = os.posix_spawnp("bash", ["bash", "-c", command], os.environ, file_actions=actions, setsid=True,
                              setsigdef=RESTORED_SIGNALS)
    finally:
        os.close(write_end)
        os.close(null)

    def poll_exit() -> int | None:
        done, status = os.waitpid(pid, os.WNOHANG)
        return None if done == 0 else os.waitstatus_to_exitcode(status)

    try:
        result = watch(pid, read_end, poll_exit, start=start, timeout_s=timeout_s)
    finally:
        os.close(read_end)
    try:  # reap it if the deadline, not its exit, ended the watch (it was killed)
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    return result


def capabilities() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return -1


def drop_privileges(uid: int) -> None:
    """Become `uid` (no groups, and with it no capabilities) before serving anything; refuse to serve
    if any capability survived."""
    if uid >= 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    if capabilities() != 0:
        sys.stderr.write("shell_server: refusing to serve with capabilities left\n")
        raise SystemExit(3)


def serve(cwd: str, uid: int = -1) -> None:
    if not in_private_pid_namespace():
        # kill_others() would kill every process of this user on a host: refuse outright.
        sys.stderr.write("shell_server: refusing to run outside a private pid namespace\n")
        raise SystemExit(3)
    drop_privileges(uid)
    os.chdir(cwd)
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    while header := requests.readline():
        timeout, size = header.split()
        command = requests.read(int(size)).decode("utf-8", errors="replace")
        result = run_command(command, float(timeout))
        kill_others()
        data = result.output.encode("utf-8", errors="replace")
        answers.write(f"{result.exit_code} {int(result.timed_out)} {result.elided_chars} {result.duration_s:.6f} "
                      f"{len(data)}\n".encode() + data)
        answers.flush()


if __name__ == "__main__":
    # Started as a script with `python -I -S` (no site-packages); argv: the folder holding this server's
    # own copy of its modules, the working directory, the uid to become (-1: stay).
    sys.path.insert(0, sys.argv[1])
    serve(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else -1)
