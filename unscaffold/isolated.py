"""Running a parser or scorer on hostile input in a child process with time and memory limits.

Some libraries crash the whole process on a crafted input (RDKit on a long chain of atoms) or allocate
without bound (a workbook claiming a huge sheet). In a child, such an input costs one trial a clear
`verifier_error`, never the run. Children come from a fork server started once, so each call costs a
fork, not an interpreter start."""

from __future__ import annotations

import multiprocessing as mp
import resource
import threading
from collections.abc import Callable
from typing import Any

_ctx = mp.get_context("forkserver")
_preload_lock = threading.Lock()
_preloaded: set[str] = set()


class IsolatedFailure(Exception):
    """The child crashed, ran out of time or memory, or raised; the message is a sentence for `reason`."""


def _child(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...], memory_bytes: int) -> None:
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    limit = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
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


def run_isolated(fn: Callable[..., Any], *args: Any, timeout_s: float = 60.0,
                 memory_bytes: int = 2 * 1024**3, what: str = "the scorer") -> Any:
    """`fn(*args)` in a child; its return value, or IsolatedFailure saying what went wrong."""
    receive, send = _ctx.Pipe(duplex=False)
    proc = _ctx.Process(target=_child, args=(send, fn, args, memory_bytes), daemon=True)
    proc.start()
    send.close()
    try:
        if not receive.poll(timeout_s):
            proc.kill()
            proc.join()
            raise IsolatedFailure(f"{what} took longer than its limit of {timeout_s:g} s")
        try:
            status, value = receive.recv()
        except EOFError:
            proc.join()
            raise IsolatedFailure(f"{what} crashed (exit code {proc.exitcode})") from None
    finally:
        receive.close()
        if proc.is_alive():
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join()
    if status != "ok":
        raise IsolatedFailure(f"{what} failed: {value}")
    return value
