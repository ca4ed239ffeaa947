"""Runs one argv on the host in its own session with a deadline (the `none` sandbox, and bubblewrap's
own start), killing the whole process group when it ends."""

from __future__ import annotations

import subprocess
import time

from unscaffold.bounded import spawn
from unscaffold.minimal_harness.sandbox.result import ExecResult
from unscaffold.minimal_harness.sandbox.stream import kill_group, watch

_REAP_S = 2.0


def run_argv(
    argv: list[str],
    *,
    timeout_s: float,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    rlimits: dict[int, tuple[int, int]] | None = None,
) -> ExecResult:
    """Stream merged stdout/stderr into a bounded collector until exit or the deadline."""
    start = time.monotonic()
    proc = spawn(argv, rlimits=rlimits, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                 cwd=cwd, env=env)
    assert proc.stdout is not None
    try:
        result = watch(proc.pid, proc.stdout.fileno(), proc.poll, start=start, timeout_s=timeout_s)
    finally:
        proc.stdout.close()
        try:
            proc.wait(timeout=_REAP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        kill_group(proc.pid)
    return result
