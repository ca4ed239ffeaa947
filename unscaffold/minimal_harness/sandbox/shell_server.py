"""Runs inside the bubblewrap sandbox for the whole trial: one fresh `bash -c` per request.

Namespaces are built once per trial instead of once per command (bubblewrap's start-up dominates a
step otherwise). Each request is a JSON line on stdin; each answer a JSON line on stdout. After every
command, everything else in the pid namespace is killed, so nothing a command started outlives it.
A command can see and signal this server (same user); if it kills it, the host side starts a new one."""

from __future__ import annotations

import json
import os
import signal
import sys


def kill_others() -> None:
    me = os.getpid()
    for _ in range(3):  # a fork bomb may respawn between passes
        victims = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
        if not victims:
            return
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in victims:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def in_private_pid_namespace() -> bool:
    """Bubblewrap's init is pid 1 and this server one of the first pids; on a host that never holds."""
    return os.getpid() <= 8 and os.getppid() == 1


def serve(cwd: str) -> None:
    from unscaffold.minimal_harness.sandbox.process import run_argv

    if not in_private_pid_namespace():
        # kill_others() would kill every process of this user on a host: refuse outright.
        sys.stderr.write("shell_server: refusing to run outside a private pid namespace\n")
        raise SystemExit(3)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    for line in sys.stdin:
        request = json.loads(line)
        result = run_argv(["bash", "-c", request["command"]], timeout_s=float(request["timeout_s"]), cwd=cwd)
        kill_others()
        sys.stdout.write(result.to_json() + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    # Started as a script with `python -I -S` (no site-packages: a third of the start-up time);
    # argv: the folder that holds the `unscaffold` package, then the working directory.
    sys.path.insert(0, sys.argv[1])
    serve(sys.argv[2])
