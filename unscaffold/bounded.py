"""Child processes under limits: time, memory and the like, crash isolation, and an optional cgroup.

Some work must not be able to take the run down with it: a parser or scorer on hostile input (RDKit
crashes the whole process on a crafted SMILES, a workbook can claim a huge sheet), LibreOffice on a
student's file, and every process of a sandbox. Such work runs in a child; running past a limit, or
dying, ends it with a `LimitExceeded` that says which limit in words for a result file.

Limits are set without Python code between fork and exec (Popen's pre-exec hook, unsafe while other
threads run, and the runner calls sandboxes from threads): the child starts as a tiny exec wrapper
that puts itself into the cgroup (`/bin/sh`'s builtin echo into `cgroup.procs`), lowers its rlimits
(`prlimit`, or a bare Python where util-linux is missing) and becomes the real program. The cost is
one or two execs per child, paid once per sandbox (its server serves every command) or per bounded
step. Limits are never set above the parent's own hard limits.

Three ways in: `run_bounded` (a program to its end), `Worker` (a program serving line-delimited
JSON requests, kept between requests since starting Python costs more than a small request), and
`call_bounded` (a Python function in a child forked from a warm fork server)."""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing as mp
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from unscaffold.untrusted import size_text

STDERR_TAIL = 400
_OUT_OF_MEMORY = ("MemoryError", "Cannot allocate memory", "Memory allocation", "std::bad_alloc", "out of memory")
ATTACH_FAILED = 125  # the wrapper's exit code when the child could not join its cgroup
# `n path... argv`: join each of the n cgroups (writing 0 names the writer), then become argv.
_ATTACH = ('n=$1; shift; while [ "$n" -gt 0 ]; do echo 0 > "$1" || exit 125; shift; n=$((n - 1)); done; '
           'exec "$@"')
# `RESOURCE:SOFT:HARD... -- argv` where prlimit is missing (stdlib only, no site).
_PY_LIMITS = ("import os, resource, sys\n"
              "end = sys.argv.index('--')\n"
              "for spec in sys.argv[1:end]:\n"
              "    kind, soft, hard = map(int, spec.split(':'))\n"
              "    resource.setrlimit(kind, (soft, hard))\n"
              "os.execvp(sys.argv[end + 1], sys.argv[end + 1:])\n")
_PRLIMIT_FLAGS = {resource.RLIMIT_AS: "--as", resource.RLIMIT_CPU: "--cpu", resource.RLIMIT_NPROC: "--nproc",
                  resource.RLIMIT_FSIZE: "--fsize", resource.RLIMIT_NOFILE: "--nofile",
                  resource.RLIMIT_CORE: "--core"}


class LimitExceeded(Exception):
    """A bounded child ran past a limit, died or failed; the message says which, in words for a result file."""


class Deadline:
    """What is left of one case's time; every step of the case gets at most that."""

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


def capped(resource_id: int, soft: int, hard: int | None = None) -> tuple[int, int]:
    """(soft, hard) for a resource, neither above this process's own hard limit (which a child may not
    raise), the soft one never above the hard one."""
    own = resource.getrlimit(resource_id)[1]
    hard = soft if hard is None else hard
    if own != resource.RLIM_INFINITY:
        soft, hard = min(soft, own), min(hard, own)
    return min(soft, hard), hard


def wrapped(argv: Sequence[str], rlimits: Mapping[int, tuple[int, int]] | None = None,
            cgroup_procs: Sequence[str] = ()) -> list[str]:
    """`argv` behind the exec wrapper that joins the cgroups (their `cgroup.procs` files) and sets the
    rlimits (resource -> (soft, hard), see `capped`) before the program starts."""
    out: list[str] = []
    if cgroup_procs:
        out += ["/bin/sh", "-c", _ATTACH, "attach", str(len(cgroup_procs)), *cgroup_procs]
    if rlimits:
        prlimit = _prlimit()
        if prlimit is not None and all(r in _PRLIMIT_FLAGS for r in rlimits):
            out += [prlimit] + [f"{_PRLIMIT_FLAGS[r]}={soft}:{hard}" for r, (soft, hard) in rlimits.items()] + ["--"]
        else:
            out += [sys.executable, "-I", "-S", "-c", _PY_LIMITS,
                    *(f"{r}:{soft}:{hard}" for r, (soft, hard) in rlimits.items()), "--"]
    return out + list(argv)


_prlimit_path: list[str | None] = []


def _prlimit() -> str | None:
    if not _prlimit_path:
        _prlimit_path.append(shutil.which("prlimit") or shutil.which("prlimit", path="/usr/bin:/bin"))
    return _prlimit_path[0]


def spawn(argv: Sequence[str], *, rlimits: Mapping[int, tuple[int, int]] | None = None,
          cgroup_procs: Sequence[str] = (), **popen: Any) -> subprocess.Popen[bytes]:
    """Start `argv` in a session of its own (so its whole process group can be ended) behind the wrapper."""
    return subprocess.Popen(wrapped(argv, rlimits, cgroup_procs), start_new_session=True, **popen)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """End the child's process group (helpers it left behind go with it) and reap the child."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait()


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: bytes
    stderr_tail: str


def _step_limits(memory_bytes: int, cpu_s: float) -> dict[int, tuple[int, int]]:
    """Address space, and CPU time with a second of grace between SIGXCPU and SIGKILL."""
    cpu = math.ceil(cpu_s) + 1
    return {resource.RLIMIT_AS: capped(resource.RLIMIT_AS, memory_bytes),
            resource.RLIMIT_CPU: capped(resource.RLIMIT_CPU, cpu, cpu + 1)}


def run_bounded(argv: list[str], *, what: str, time_s: float, memory_bytes: int, stdin: bytes = b"",
                env: dict[str, str] | None = None, cwd: str | None = None) -> Finished:
    """Run `argv` to the end within the limits; raises LimitExceeded on a timeout or a fatal signal."""
    proc = spawn(argv, rlimits=_step_limits(memory_bytes, time_s), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, env=env, cwd=cwd)
    try:
        out, err = proc.communicate(stdin, timeout=time_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=5)
        raise LimitExceeded(f"{what} ran past its {time_s:g} s time limit and was stopped") from None
    finally:
        kill_group(proc)  # helpers it left behind (LibreOffice forks) go with it
    tail = err.decode(errors="replace").strip()[-STDERR_TAIL:]
    raise_for_death(proc.returncode, tail, what, time_s, memory_bytes)
    return Finished(proc.returncode, out, tail)


def raise_for_death(returncode: int, tail: str, what: str, time_s: float, memory_bytes: int) -> None:
    """LimitExceeded for a child killed by a signal or out of memory; nothing for an ordinary exit."""
    if returncode < 0:
        name = signal.Signals(-returncode).name
        hint = {"SIGXCPU": f"its {time_s:g} s CPU limit", "SIGKILL": "a kill (out of memory?)",
                "SIGSEGV": f"a crash (memory limit {size_text(memory_bytes)}?)"}.get(name, "a fatal signal")
        raise LimitExceeded(f"{what} was ended by {name}: {hint}")
    if any(sign in tail for sign in _OUT_OF_MEMORY):
        raise LimitExceeded(f"{what} ran past its {size_text(memory_bytes)} memory limit")


class Worker:
    """One child serving JSON requests one at a time, each within a wall-clock limit; not thread-safe
    (keep one per thread). The address-space limit holds for the child's whole life."""

    MAX_REQUESTS = 200  # a fresh process now and then, so no request inherits another's fragmentation

    def __init__(self, argv: list[str], memory_bytes: int, env: dict[str, str] | None = None) -> None:
        self.argv, self.memory_bytes, self.env = argv, memory_bytes, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.served = 0

    def ask(self, request: dict[str, Any], *, what: str, time_s: float) -> dict[str, Any]:
        """The child's answer to one request; raises LimitExceeded (and ends the child) on a timeout,
        a death, or an answer that is not one JSON object."""
        proc = self._process()
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died; reading says how
        line = self._read_line(proc, time_s, what)
        self.served += 1
        try:
            answer = json.loads(line)
        except json.JSONDecodeError:
            self.close()
            raise LimitExceeded(f"{what} failed: the reader's answer is not JSON") from None
        if not isinstance(answer, dict):
            self.close()
            raise LimitExceeded(f"{what} failed: the reader's answer is not an object")
        if answer.get("error") == "memory":
            self.close()
            raise LimitExceeded(f"{what} ran past its {size_text(self.memory_bytes)} memory limit")
        if self.served >= self.MAX_REQUESTS:
            self.close()
        return answer

    def _process(self) -> subprocess.Popen[bytes]:
        if self.proc is None or self.proc.poll() is not None:
            self.close()
            self.served = 0
            self.stderr = tempfile.TemporaryFile()  # a pipe nobody drains could fill and block the child
            self.proc = spawn(self.argv, rlimits=_step_limits(self.memory_bytes, 1e6), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=self.stderr, env=self.env)
        return self.proc

    def _read_line(self, proc: subprocess.Popen[bytes], time_s: float, what: str) -> bytes:
        assert proc.stdout is not None
        fd, chunks, end = proc.stdout.fileno(), [], time.monotonic() + time_s
        while True:
            left = end - time.monotonic()
            ready = select.select([fd], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                self.close()
                raise LimitExceeded(f"{what} ran past its {time_s:g} s time limit and was stopped")
            chunk = os.read(fd, 1 << 20)
            if not chunk:  # the child died mid-request
                returncode = proc.wait()
                self.stderr.seek(0, os.SEEK_END)
                self.stderr.seek(max(self.stderr.tell() - STDERR_TAIL, 0))
                tail = self.stderr.read().decode(errors="replace").strip()
                self.close()
                raise_for_death(returncode, tail, what, time_s, self.memory_bytes)
                raise LimitExceeded(f"{what} failed (exit {returncode}): {tail.splitlines()[-1] if tail else ''}")
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                return b"".join(chunks)

    def close(self) -> None:
        if self.proc is not None:
            kill_group(self.proc)
            for stream in (self.proc.stdin, self.proc.stdout, self.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            self.proc = None


# A Python function in a child: children come from a fork server started once, so each call costs a
# fork, not an interpreter start, and the server is a process of its own (no fork of a threaded parent).
_ctx = mp.get_context("forkserver")
_preload_lock = threading.Lock()
_preloaded: set[str] = set()


def _child(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...], memory_bytes: int) -> None:
    own_hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, capped(resource.RLIMIT_AS, memory_bytes, own_hard))
    try:
        conn.send(("ok", fn(*args)))
    except MemoryError:
        conn.send(("error", f"ran out of its {memory_bytes / 1024**2:,.0f} MiB memory limit"))
    except BaseException as e:  # anything: the parent decides what it means
        conn.send(("error", f"{type(e).__name__}: {str(e)[:300]}"))
    finally:
        conn.close()


def preload(*modules: str) -> None:
    """Modules the fork server imports once (before its first child), so children start warm."""
    with _preload_lock:
        new = set(modules) - _preloaded
        if new:
            _preloaded.update(new)
            _ctx.set_forkserver_preload(sorted(_preloaded))


def call_bounded(fn: Callable[..., Any], *args: Any, timeout_s: float = 60.0,
                 memory_bytes: int = 2 * 1024**3, what: str = "the scorer") -> Any:
    """`fn(*args)` in a child; its return value, or LimitExceeded saying what went wrong."""
    receive, send = _ctx.Pipe(duplex=False)
    proc = _ctx.Process(target=_child, args=(send, fn, args, memory_bytes), daemon=True)
    proc.start()
    send.close()
    try:
        if not receive.poll(timeout_s):
            proc.kill()
            proc.join()
            raise LimitExceeded(f"{what} took longer than its limit of {timeout_s:g} s")
        try:
            status, value = receive.recv()
        except EOFError:
            proc.join()
            raise LimitExceeded(f"{what} crashed (exit code {proc.exitcode})") from None
    finally:
        receive.close()
        if proc.is_alive():
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join()
    if status != "ok":
        raise LimitExceeded(f"{what} failed: {value}")
    return value
