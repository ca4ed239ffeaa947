"""Child processes with a wall-clock, CPU and address-space limit, for work on untrusted workbooks.

Parsing a workbook or recalculating its formulas can take minutes, gigabytes or crash outright on a
hostile or merely unusual file. Each such step runs in its own process group under limits; running
past one ends it with a `LimitExceeded` that says which limit, so a scorer reports it instead of
hanging or dying. The limits are set by a tiny exec wrapper in the child (not `preexec_fn`, which is
unsafe in a threaded parent), and never above the parent's own hard limits.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

STDERR_TAIL = 400
# Runs in the child before the real program: lower the limits, then become it (stdlib only, `-I`).
_WRAPPER = (
    "import os, resource, sys\n"
    "def limit(kind, want, grace):\n"
    "    hard = resource.getrlimit(kind)[1]\n"
    "    cap = (lambda v: v) if hard == resource.RLIM_INFINITY else (lambda v: min(v, hard))\n"
    "    resource.setrlimit(kind, (cap(want), cap(want + grace)))\n"
    "limit(resource.RLIMIT_AS, int(sys.argv[1]), 0)\n"
    "limit(resource.RLIMIT_CPU, int(sys.argv[2]), 1)\n"
    "os.execvp(sys.argv[3], sys.argv[3:])\n"
)


def size_text(n: int) -> str:
    """Bytes in the unit a person reads: `512 bytes`, `40 KB`, `64 MB`."""
    for unit, shift in (("GB", 30), ("MB", 20), ("KB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} bytes"


class LimitExceeded(Exception):
    """A bounded step ran past a limit or died; the message says which, in words for a result file."""


class Deadline:
    """What is left of one scoring case's time; every step of the case gets at most that."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def step(self, limit_s: float, what: str) -> float:
        """The time a step may take; raises when the case has none left."""
        left = self.left()
        if left <= 0.5:
            raise LimitExceeded(f"scoring ran past the case's {self.seconds:g} s limit before {what}")
        return min(limit_s, left)


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: bytes
    stderr_tail: str


def run_bounded(argv: list[str], *, what: str, time_s: float, memory_bytes: int, stdin: bytes = b"",
                env: dict[str, str] | None = None) -> Finished:
    """Run `argv` to the end within the limits; raises LimitExceeded on a timeout or a fatal signal."""
    wrapped = [sys.executable, "-I", "-c", _WRAPPER, str(memory_bytes), str(math.ceil(time_s) + 1), *argv]
    proc = subprocess.Popen(wrapped, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, env=env)
    try:
        out, err = proc.communicate(stdin, timeout=time_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=5)
        raise LimitExceeded(f"{what} ran past its {time_s:g} s time limit and was stopped") from None
    finally:
        _kill_group(proc)  # helpers it left behind (LibreOffice forks) go with it
    tail = err.decode(errors="replace").strip()[-STDERR_TAIL:]
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        hint = {"SIGXCPU": f"its {time_s:g} s CPU limit", "SIGKILL": "a kill (out of memory?)",
                "SIGSEGV": f"a crash (memory limit {size_text(memory_bytes)}?)"}.get(name, "a fatal signal")
        raise LimitExceeded(f"{what} was ended by {name}: {hint}")
    if "MemoryError" in tail:
        raise LimitExceeded(f"{what} ran past its {size_text(memory_bytes)} memory limit")
    return Finished(proc.returncode, out, tail)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait()
