"""Runs one argv in its own session with a deadline; kills the whole process group when it ends."""

from __future__ import annotations

import os
import resource
import selectors
import signal
import subprocess
import time
from collections.abc import Callable

from unscaffold.minimal_harness.sandbox.base import ExecResult, Limits
from unscaffold.minimal_harness.sandbox.output import OutputCollector

TIMEOUT_EXIT_CODE = 124
_DRAIN_S = 2.0


def timeout_note(timeout_s: float) -> str:
    """The line appended to a timed-out command's output; shared so every backend says the same."""
    return f"[command timed out after {timeout_s:g} s; its process group was killed]"


def rlimit_setter(limits: Limits) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_bytes, limits.file_size_bytes))
        # A write past the size limit should fail with EFBIG, not kill the shell.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    return apply


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
    limits: Limits | None = None,
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
        preexec_fn=rlimit_setter(limits) if limits else None,
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
                if drain_deadline is not None or proc.poll() is not None:
                    break
                sel.unregister(fd)
                # Pipe closed but the process lives on: just wait for it or the deadline.
                while proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.01)
                if proc.poll() is None:
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
