"""Runs one argv in its own session with a deadline; kills the whole process group when it ends."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable

from unscaffold.minimal_harness.sandbox.output import OutputCollector
from unscaffold.minimal_harness.sandbox.result import ExecResult

TIMEOUT_EXIT_CODE = 124
_DRAIN_S = 2.0  # how long a pipe held by escaped processes may stay open after the command
_POLL_S = 0.05


def timeout_note(timeout_s: float) -> str:
    """The line appended to a timed-out command's output; shared so every backend says the same."""
    return f"[command timed out after {timeout_s:g} s; its process group was killed]"


def finish_output(output: str, timed_out: bool, timeout_s: float) -> str:
    """The collected output, with the timeout note appended when the command was killed."""
    if not timed_out:
        return output
    note = timeout_note(timeout_s)
    return f"{output}\n{note}" if output else note


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_argv(
    argv: list[str],
    *,
    timeout_s: float,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    preexec: Callable[[], None] | None = None,
) -> ExecResult:
    """Stream merged stdout/stderr into a bounded collector until exit or the deadline.

    Exit is watched through a pidfd, so a command that returns is noticed at once, not at a poll."""
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=env,
        start_new_session=True,
        preexec_fn=preexec,
    )
    assert proc.stdout is not None
    out_fd = proc.stdout.fileno()
    os.set_blocking(out_fd, False)
    pid_fd = _pidfd(proc.pid)
    collector = OutputCollector()
    timed_out = exited = eof = False
    deadline = start + timeout_s
    poller = select.poll()
    poller.register(out_fd, select.POLLIN)
    if pid_fd is not None:
        poller.register(pid_fd, select.POLLIN)
    while not (eof and exited):
        now = time.monotonic()
        if not exited and proc.poll() is not None:
            exited = True
            _kill_group(proc.pid)  # whatever the command left in its group goes with it
            deadline = min(deadline, now + _DRAIN_S)  # and what escaped it may not hold the pipe forever
            if pid_fd is not None:
                poller.unregister(pid_fd)
            continue
        if now >= deadline:
            timed_out = not exited
            _kill_group(proc.pid)
            break
        wait = deadline - now if pid_fd is not None or exited else min(deadline - now, _POLL_S)
        for fd, _ in poller.poll(wait * 1000):
            if fd != out_fd:
                continue  # the pidfd: exit is picked up at the top of the loop
            try:
                chunk = os.read(out_fd, 65536)
            except BlockingIOError:
                continue
            if chunk:
                collector.feed(chunk)
            else:
                eof = True
                poller.unregister(out_fd)
    if pid_fd is not None:
        os.close(pid_fd)
    proc.stdout.close()
    try:
        code = proc.wait(timeout=_DRAIN_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    _kill_group(proc.pid)
    if timed_out:
        code = TIMEOUT_EXIT_CODE
    elif code < 0:  # killed by a signal: report it as bash would
        code = 128 - code
    return ExecResult(
        output=finish_output(collector.text(), timed_out, timeout_s),
        exit_code=code,
        timed_out=timed_out,
        elided_chars=collector.elided_chars,
        duration_s=time.monotonic() - start,
    )


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None  # old kernel: fall back to polling
