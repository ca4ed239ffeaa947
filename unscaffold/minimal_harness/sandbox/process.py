"""Runs one argv in its own session with a deadline; kills the whole process group when it ends."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable

from unscaffold.minimal_harness.sandbox.result import ExecResult
from unscaffold.minimal_harness.sandbox.output import OutputCollector

TIMEOUT_EXIT_CODE = 124
_DRAIN_S = 2.0


def timeout_note(timeout_s: float) -> str:
    """The line appended to a timed-out command's output; shared so every backend says the same."""
    return f"[command timed out after {timeout_s:g} s; its process group was killed]"


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
    """Stream merged stdout/stderr into a bounded collector until exit or the deadline."""
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
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    collector = OutputCollector()
    timed_out = False
    deadline = start + timeout_s
    drain_deadline: float | None = None
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if drain_deadline is None:
                if proc.poll() is not None:
                    # Main process is gone: anything it left in its group goes too.
                    _kill_group(proc.pid)
                    drain_deadline = now + _DRAIN_S
                elif now >= deadline:
                    timed_out = True
                    _kill_group(proc.pid)
                    drain_deadline = now + _DRAIN_S
            elif now >= drain_deadline:
                break
            wait = 0.05 if drain_deadline is None else max(0.0, drain_deadline - now)
            if not sel.select(timeout=min(wait, 0.05)):
                continue
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                if drain_deadline is None:
                    # Pipe closed: the process is exiting, or lives on without output until the deadline.
                    try:
                        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        timed_out = True
                _kill_group(proc.pid)
                break
            collector.feed(chunk)
    proc.stdout.close()
    try:
        code = proc.wait(timeout=_DRAIN_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    _kill_group(proc.pid)
    if code < 0:  # killed by a signal: report it as bash would
        code = 128 - code
    output = collector.text()
    if timed_out:
        code = TIMEOUT_EXIT_CODE
        note = timeout_note(timeout_s)
        output = f"{output}\n{note}" if output else note
    return ExecResult(
        output=output,
        exit_code=code,
        timed_out=timed_out,
        elided_chars=collector.elided_chars,
        duration_s=time.monotonic() - start,
    )
