"""Which process owns a host-wide resource (a uid, a trial's filesystem, a container), so that a later
process can tell what a killed one left: an owner is its pid and that process's start time, since a pid
alone is given to another process once its owner dies."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def start_time(pid: int) -> int | None:
    """The process's start, in clock ticks after boot (`/proc/PID/stat`, field 22); None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()  # the name may hold spaces and parentheses
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def token(pid: int | None = None) -> str:
    """`PID.START` of this process (or of `pid`); the bare pid where its start cannot be read."""
    pid = os.getpid() if pid is None else pid
    start = start_time(pid)
    return str(pid) if start is None else f"{pid}.{start}"


def alive(owner: str) -> bool:
    """Whether the process a token names still runs: the same pid with the same start time. A bare pid
    (as older versions wrote) is alive while any process has that pid; a token that does not parse is
    taken as alive, so nothing of an unknown owner is ever removed."""
    pid_text, _, start_text = owner.partition(".")
    try:
        pid = int(pid_text)
        start = int(start_text) if start_text else None
    except ValueError:
        return True
    if start is None:
        return pid_alive(pid)
    return start_time(pid) == start


def pid_alive(pid: int) -> bool:
    """Whether any process has this pid (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def uids_running() -> set[int]:
    """Every user id (real, effective, saved or filesystem) some process of the host runs as. A process that
    has exited and waits to be reaped (a zombie) is not counted: it runs no more and holds nothing, and its
    reaping is up to its parent (for a killed run's sandbox, the host's init, late on a busy host)."""
    found: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for line in Path(entry.path, "status").read_text().splitlines():
                if line.startswith("State:") and line.split()[1:2] in (["Z"], ["X"]):
                    break  # State comes before Uid
                if line.startswith("Uid:"):
                    found.update(int(u) for u in line.split()[1:])
                    break
    return found
