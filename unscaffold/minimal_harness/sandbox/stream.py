"""Waits for a started process while streaming its output into a bounded collector, up to a deadline.

Shared by the host-side runner (subprocess) and the in-sandbox shell server (posix_spawn), so it only
imports what a bare `python -I -S` has at hand: start-up of the server is per trial, and it counts."""

from __future__ import annotations

import os
import select
import time

from unscaffold.minimal_harness.sandbox.output import OutputCollector
from unscaffold.minimal_harness.sandbox.result import ExecResult

TYPE_CHECKING = False  # `typing` and `collections` are imports the shell server would pay for at each start
if TYPE_CHECKING:
    from collections.abc import Callable

TIMEOUT_EXIT_CODE = 124
SIGKILL = 9  # numeric: the `signal` module costs an import the shell server does not need
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
    if not output or output.endswith("\n"):  # the note on a line of its own, never after a blank one
        return output + note
    return f"{output}\n{note}"


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def watch(pid: int, out_fd: int, poll_exit: Callable[[], int | None], *, start: float, timeout_s: float
          ) -> ExecResult:
    """Collect output until the process has exited and its pipe is closed, or the deadline.

    `pid` leads its own process group; whatever is left in the group dies when the process exits, and
    the whole group on a timeout. `poll_exit` returns the exit status once the process has ended (as
    Popen.poll does: negative for a signal). Exit is watched through a pidfd where the kernel has one."""
    os.set_blocking(out_fd, False)
    try:
        pid_fd: int | None = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pid_fd = None  # old kernel: fall back to polling
    collector = OutputCollector()
    timed_out = exited = eof = False
    code: int | None = None
    deadline = start + timeout_s
    poller = select.poll()
    poller.register(out_fd, select.POLLIN)
    if pid_fd is not None:
        poller.register(pid_fd, select.POLLIN)
    while not (eof and exited):
        now = time.monotonic()
        if not exited and (code := poll_exit()) is not None:
            exited = True
            kill_group(pid)  # whatever the command left in its group goes with it
            deadline = min(deadline, now + _DRAIN_S)  # and what escaped it may not hold the pipe forever
            if pid_fd is not None:
                poller.unregister(pid_fd)
            continue
        if now >= deadline:
            timed_out = not exited
            kill_group(pid)
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
    if timed_out:
        code = TIMEOUT_EXIT_CODE
    elif code is not None and code < 0:  # killed by a signal: report it as bash would
        code = 128 - code
    return ExecResult(
        output=finish_output(collector.text(), timed_out, timeout_s),
        exit_code=code if code is not None else TIMEOUT_EXIT_CODE,
        timed_out=timed_out,
        elided_chars=collector.elided_chars,
        duration_s=time.monotonic() - start,
    )
