"""One control group per sandbox: every process a sandbox ever starts is in it, so the host can end all of
them without racing a process that forks its own successor, and bound their number and memory together.

Needs root. Works with a cgroup v2 tree (`cgroup.kill`, `cgroup.freeze`), v1 hierarchies (`freezer`,
`pids`, `memory`) or both at once (a hybrid host): a process written to each group's `cgroup.procs`
belongs to all of them. Groups are made below the host process's own, so a container's limits still hold."""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SIGKILL = 9
_SETTLE_S = 5.0  # how long killed processes may take to leave the group (they are not runnable meanwhile)
_POLL_S = 0.001
_PASS_S = 0.5  # how long one kill pass waits before it looks again for processes that forked meanwhile


@functools.cache
def _mounts() -> tuple[Path | None, dict[str, tuple[Path, str]]]:
    """The cgroup v2 mount point and, per v1 controller, its mount point and the mount's root. Read once
    per process: the mount table grows with every trial's own filesystem, and cgroup mounts stay put."""
    v2: Path | None = None
    v1: dict[str, tuple[Path, str]] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None, {}
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        if tail[0] == "cgroup2" and v2 is None:
            v2 = Path(fields[4])
        elif tail[0] == "cgroup":
            for option in tail[2].split(","):
                if option in ("freezer", "pids", "memory"):
                    v1.setdefault(option, (Path(fields[4]), fields[3]))
    return v2, v1


def _own_paths() -> dict[str, str]:
    """This process's group per hierarchy: '' for v2, a controller name for v1."""
    out: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                out[name] = path
    return out


def _below(mount: Path, root: str, path: str) -> Path:
    relative = path[len(root):] if root != "/" and path.startswith(root) else path
    return mount / relative.lstrip("/")


@dataclass
class SandboxCgroup:
    """The groups of one sandbox. `kill_except` ends every process but the ones named, race-free: the
    group is frozen first, so nothing in it can fork while it is being emptied."""

    groups: list[Path]
    freeze_v2: Path | None = None  # the group's cgroup.freeze (v2), else freezer.state (v1) below
    freezer_v1: Path | None = None
    kill_v2: Path | None = None
    limits: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, name: str, processes: int, memory_bytes: int) -> SandboxCgroup | None:
        """Make the groups (None when not root, or when no hierarchy can freeze or kill a group)."""
        if os.geteuid() != 0:
            return None
        v2, v1 = _mounts()
        own = _own_paths()
        made: list[Path] = []
        box = cls(groups=made)

        def make(parent: Path) -> Path | None:
            group = parent / name
            try:
                group.mkdir()
            except OSError:
                return None
            made.append(group)
            return group

        try:
            if v2 is not None and "" in own and (g := make(_below(v2, "/", own[""]))) is not None:
                if (g / "cgroup.freeze").exists():
                    box.freeze_v2 = g / "cgroup.freeze"
                if (g / "cgroup.kill").exists():
                    box.kill_v2 = g / "cgroup.kill"
            if box.freeze_v2 is None and "freezer" in v1:
                mount, root = v1["freezer"]
                if (g := make(_below(mount, root, own.get("freezer", "/")))) is not None:
                    box.freezer_v1 = g / "freezer.state"
            if box.freeze_v2 is None and box.freezer_v1 is None:
                box.remove()
                return None
            box._limit(v1, own, make, processes, memory_bytes)
        except BaseException:
            box.remove()
            raise
        return box

    @staticmethod
    def _parents() -> list[tuple[str, Path]]:
        """(hierarchy, folder) where this process makes its sandboxes' groups: '' for v2, else the v1
        controller."""
        v2, v1 = _mounts()
        own = _own_paths()
        out = [("", _below(v2, "/", own[""]))] if v2 is not None and "" in own else []
        for controller, (mount, root) in sorted(v1.items()):
            out.append((controller, _below(mount, root, own.get(controller, "/"))))
        return out

    @classmethod
    def leftovers(cls, prefix: str) -> list[str]:
        """Names of the groups beside this process's own sandboxes' that start with `prefix`: a sandbox's
        groups left by a process killed before it could remove them (or another process's, live)."""
        names: set[str] = set()
        if os.geteuid() != 0:
            return []
        for _, parent in cls._parents():
            with contextlib.suppress(OSError):
                names.update(e.name for e in os.scandir(parent) if e.name.startswith(prefix) and e.is_dir())
        return sorted(names)

    @classmethod
    def existing(cls, name: str) -> SandboxCgroup | None:
        """The groups named `name` that exist (see `leftovers`), able to end their processes and be removed."""
        box = cls(groups=[])
        for hierarchy, parent in cls._parents():
            group = parent / name
            if not group.is_dir():
                continue
            box.groups.append(group)
            if hierarchy == "":
                box.freeze_v2 = group / "cgroup.freeze" if (group / "cgroup.freeze").exists() else None
                box.kill_v2 = group / "cgroup.kill" if (group / "cgroup.kill").exists() else None
            elif hierarchy == "freezer":
                box.freezer_v1 = group / "freezer.state"
        return box if box.groups else None

    @classmethod
    def of_process(cls, pid: int, name: str) -> SandboxCgroup | None:
        """The group process `pid` is in whose path names `name` (a container's own, as its engine made it),
        to list, freeze and kill its processes from here: None when the process is gone, this process may
        not freeze the group, or it has groups below it."""
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except OSError:
            return None
        paths: dict[str, str] = {}
        for line in lines:
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
        v2, v1 = _mounts()
        box = cls(groups=[])
        def usable(group: Path, freeze: str) -> bool:
            """A group this process may freeze, without groups below it (whose processes it would not list)."""
            try:
                return os.access(group / freeze, os.W_OK) and not any(e.is_dir() for e in os.scandir(group))
            except OSError:
                return False

        if v2 is not None and name in paths.get("", "") and usable(group := _below(v2, "/", paths[""]),
                                                                     "cgroup.freeze"):
            box.groups.append(group)
            box.freeze_v2 = group / "cgroup.freeze"
        elif "freezer" in v1 and name in paths.get("freezer", ""):
            mount, root = v1["freezer"]
            if usable(group := _below(mount, root, paths["freezer"]), "freezer.state"):
                box.groups.append(group)
                box.freezer_v1 = group / "freezer.state"
        return box if box.groups else None

    def _limit(self, v1: dict[str, tuple[Path, str]], own: dict[str, str], make: Callable[[Path], Path | None],
               processes: int, memory_bytes: int) -> None:
        """pids and memory limits: in the v2 group where its controllers are on, else in v1 groups."""
        for controller, file, value in (("pids", "pids.max", processes), ("memory", "memory.max", memory_bytes)):
            target = next((g / file for g in self.groups if (g / file).exists()), None)
            if target is None and controller in v1:
                mount, root = v1[controller]
                group = make(_below(mount, root, own.get(controller, "/")))
                file = "memory.limit_in_bytes" if controller == "memory" else file
                target = group / file if group is not None else None
            if target is not None:
                target.write_text(str(value))
                self.limits.append(controller)

    def procs_files(self) -> list[str]:
        """The `cgroup.procs` of every group: a process the exec wrapper writes there belongs to the
        sandbox before it starts anything (see unscaffold.bounded)."""
        return [str(g / "cgroup.procs") for g in self.groups]

    def procs(self) -> set[int]:
        """Every process in the sandbox (the groups hold the same ones; the first is read). Read after every
        command, so with plain system calls rather than a text file object."""
        chunks: list[bytes] = []
        try:
            fd = os.open(self.groups[0] / "cgroup.procs", os.O_RDONLY | os.O_CLOEXEC)
            try:
                while chunk := os.read(fd, 1 << 16):
                    chunks.append(chunk)
            finally:
                os.close(fd)
        except OSError:
            return set()
        return {int(p) for p in b"".join(chunks).split()}

    def _freeze(self, frozen: bool) -> None:
        if self.freeze_v2 is not None:
            self.freeze_v2.write_text("1" if frozen else "0")
            events = self.freeze_v2.parent / "cgroup.events"
            want = f"frozen {int(frozen)}"
            end = time.monotonic() + _SETTLE_S
            while want not in events.read_text() and time.monotonic() < end:
                time.sleep(_POLL_S)
        elif self.freezer_v1 is not None:
            self.freezer_v1.write_text("FROZEN" if frozen else "THAWED")
            end = time.monotonic() + _SETTLE_S
            while frozen and self.freezer_v1.read_text().strip() != "FROZEN" and time.monotonic() < end:
                time.sleep(_POLL_S)

    def kill_except(self, keep: set[int]) -> bool:
        """End every process but `keep`; True once only those are left. Cheap when nothing else is there:
        a process that could fork is listed in the group, so an empty remainder cannot grow on its own."""
        if self.procs() <= keep:
            return True
        end = time.monotonic() + _SETTLE_S
        while True:  # pass after pass: under load a freeze can time out, and a process not yet frozen forks
            self._freeze(True)
            try:
                for pid in self.procs() - keep:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, SIGKILL)
            finally:
                self._freeze(False)
            if self._settle(keep, min(end, time.monotonic() + _PASS_S)) or time.monotonic() > end:
                return self.procs() <= keep

    def kill_all(self) -> bool:
        """End every process in the sandbox; True once the group is empty."""
        if self.kill_v2 is not None:
            with contextlib.suppress(OSError):
                self.kill_v2.write_text("1")
            return self._settle(set(), time.monotonic() + _SETTLE_S)
        return self.kill_except(set())

    def _settle(self, keep: set[int], end: float) -> bool:
        """Whether only `keep` is left by `end` (killed processes take a moment to leave the group)."""
        while not self.procs() <= keep:
            if time.monotonic() > end:
                return False
            time.sleep(_POLL_S)
        return True

    def remove(self) -> None:
        """Remove the groups (children first; a group with processes left stays, and says so by staying)."""
        for group in reversed(self.groups):
            with contextlib.suppress(OSError):
                group.rmdir()
        self.groups = [g for g in self.groups if g.exists()]
