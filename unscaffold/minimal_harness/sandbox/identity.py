"""Who a sandbox's commands run as: never root.

When the host runs as root, each live sandbox gets a user id of its own (named `sandbox` inside, no
groups, no capabilities) and its writable folders are handed to that id. A uid of its own is what makes the
process limit hold: the kernel counts processes per uid and ignores the limit for root altogether.
A uid is held in a registry shared by every process of the host until its sandbox has closed and
nothing it owned is left, so no later sandbox inherits a file or a process of an earlier one. Each entry
names its owner (pid and start time): a process that was killed cannot give its uids back, so the next
process to allocate one reclaims them (`reclaim_stale`) once their owner is gone, their cgroups ended and
removed, and no process runs as them.
As an ordinary user, commands keep that user's id inside a user namespace with no capabilities."""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from pathlib import Path

from unscaffold.minimal_harness.sandbox import owner
from unscaffold.minimal_harness.sandbox.base import SandboxConfig
from unscaffold.minimal_harness.sandbox.cgroup import SandboxCgroup

# A range far above any distribution's users; each process of the host starts looking in its own block.
UID_BASE = 1_610_000_000
UID_BLOCK = 4096
# One entry per uid held, made atomically: a symbolic link whose target is the owner's token (`pid.start`).
# Older versions made an empty folder instead; such an entry has no known owner and is never reclaimed.
REGISTRY = Path("/run/unscaffold-uids")
CGROUP_PREFIX = "unscaffold-"  # a sandbox's cgroups are named this and its uid
_EXIT_WAIT_S = 5.0  # how long killed processes of a stale uid may take to finish exiting
MAX_DEPTH = 256  # folders below this depth are not handed over (the host never puts files that deep)
_lock = threading.Lock()
_in_use: set[int] = set()
_swept: set[int] = set()  # the pids (this process, or a fork of it) that have reclaimed stale entries
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def host_is_root() -> bool:
    return os.geteuid() == 0


def _claim(uid: int) -> bool:
    """Take `uid` in the host-wide registry (False: another sandbox, live or crashed, holds it)."""
    try:
        REGISTRY.mkdir(mode=0o700, exist_ok=True)
        os.symlink(owner.token(), REGISTRY / str(uid))
    except FileExistsError:
        return False
    except OSError:
        return True  # no registry can be kept here: this process's own bookkeeping still holds
    return True


def allocate_uid() -> int | None:
    """A uid no other sandbox of this host holds; None when not root (nothing to switch)."""
    if not host_is_root():
        return None
    if os.getpid() not in _swept:
        _swept.add(os.getpid())
        reclaim_stale()
    base = UID_BASE + (os.getpid() % 100_000) * UID_BLOCK
    with _lock:
        for slot in range(UID_BLOCK):
            uid = base + slot
            if uid not in _in_use and _claim(uid):
                _in_use.add(uid)
                return uid
    raise RuntimeError(f"more than {UID_BLOCK} live sandboxes in one process")


def release_uid(uid: int | None) -> None:
    """Give the uid back; only once none of its processes runs and none of its files is left."""
    if uid is not None:
        with _lock:
            _in_use.discard(uid)
            _remove_entry(REGISTRY / str(uid))


def _remove_entry(entry: Path) -> None:
    try:
        entry.unlink()
    except IsADirectoryError:  # as older versions made it
        with contextlib.suppress(OSError):
            entry.rmdir()
    except OSError:
        pass


def _entry_owner(entry: Path) -> str | None:
    """The owner's token of a registry entry; None when it has none (an older version's folder) or is gone."""
    try:
        return os.readlink(entry)
    except OSError:
        return None


def _held_live(registry: Path, uid: int) -> bool:
    """Whether a live process (or an older version's entry, owner unknown) holds `uid` now."""
    entry = registry / str(uid)
    if not os.path.lexists(entry):
        return False
    token = _entry_owner(entry)
    return token is None or owner.alive(token)


def _running_once_exited(ended: set[int]) -> set[int]:
    """`owner.uids_running()` once the processes of the uids in `ended` (whose groups were just killed) have
    finished exiting: a process leaves its group before it has exited, and a busy host may hold it there a
    while. Bounded: a uid some process still runs as after that stays taken (the next process tries again)."""
    deadline = time.monotonic() + _EXIT_WAIT_S
    while (running := owner.uids_running()) & ended and time.monotonic() < deadline:
        time.sleep(0.01)
    return running


def reclaim_stale(registry: Path | None = None, prefix: str | None = None) -> list[int]:
    """Give back what killed processes left (the uids reclaimed, sorted): the cgroups of sandboxes whose
    uid no live process holds (their processes ended, the groups removed), then each registry entry whose
    owner is gone and whose uid no process runs as. A uid some process still runs as stays taken. Each
    entry is looked at again just before it is removed: a live claim is never taken."""
    registry = REGISTRY if registry is None else registry
    prefix = CGROUP_PREFIX if prefix is None else prefix
    ended: set[int] = set()  # the uids whose groups were killed here
    for name in SandboxCgroup.leftovers(prefix):
        suffix = name[len(prefix):]
        if suffix.isdigit() and not _held_live(registry, int(suffix)):
            group = SandboxCgroup.existing(name)
            if group is not None:
                group.kill_all()
                group.remove()
                ended.add(int(suffix))
    try:
        names = [n for n in os.listdir(registry) if n.isdigit()]
    except OSError:
        return []
    stale = sorted(int(n) for n in names if not _held_live(registry, int(n)))
    if not stale:
        return []
    running = _running_once_exited(ended & set(stale))
    reclaimed = []
    for uid in stale:
        entry = registry / str(uid)
        token = _entry_owner(entry)
        if uid not in running and token is not None and not owner.alive(token):
            _remove_entry(entry)
            reclaimed.append(uid)
    return reclaimed


SANDBOX_USER = "sandbox"
_PIPE_BYTES = 60_000  # what a pipe takes before a write would block (its buffer is 64 KiB)


def identity_files(uid: int) -> dict[str, bytes]:
    """The host's /etc/passwd and /etc/group with the sandbox user added, shown over them inside. Programs
    look up their own user on start (bash does); a uid no file names sends every lookup through all of
    the host's name services (loading libnss_systemd, asking userdb), a third more CPU for `bash -c`."""
    out: dict[str, bytes] = {}
    for path, line in (("/etc/passwd", f"{SANDBOX_USER}:x:{uid}:{uid}::/tmp:/bin/bash\n"),
                       ("/etc/group", f"{SANDBOX_USER}:x:{uid}:\n")):
        try:
            host = Path(path).read_bytes()
        except OSError:
            continue
        data = host + (b"" if not host or host.endswith(b"\n") else b"\n") + line.encode()
        if len(data) <= _PIPE_BYTES:
            out[path] = data
    return out


def identity_pipes(uid: int) -> dict[str, int]:
    """Each file of `identity_files` as the read end of a pipe holding it (for bubblewrap's
    `--ro-bind-data`); the caller closes them once bubblewrap has started."""
    fds: dict[str, int] = {}
    for path, data in identity_files(uid).items():
        read, write = os.pipe()
        try:
            os.write(write, data)
        finally:
            os.close(write)
        fds[path] = read
    return fds


def _writable_roots(config: SandboxConfig) -> list[Path]:
    return [Path(config.workspace)] + [Path(m.source) for m in config.mounts if m.writable]


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """Give `root` and everything below it to uid:gid through directory handles: a folder swapped for a
    link while this runs is refused by the kernel (O_NOFOLLOW), never followed out of the tree."""
    try:
        top = os.open(root, _DIR_FLAGS)
    except OSError:
        return  # gone, a link, or not a folder: nothing to hand over
    stack: list[tuple[int, list[str]]] = []
    try:
        os.fchown(top, uid, gid)
        stack.append((top, os.listdir(top)))
        while stack:
            fd, names = stack[-1]
            if not names:
                os.close(stack.pop()[0])
                continue
            name = names.pop()
            with contextlib.suppress(OSError):
                os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)
                if len(stack) >= MAX_DEPTH or not stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    continue
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                try:
                    os.fchown(child, uid, gid)
                    stack.append((child, os.listdir(child)))
                except OSError:
                    os.close(child)
    finally:
        for fd, _ in stack:
            os.close(fd)


def hand_over(config: SandboxConfig, uid: int | None) -> None:
    """Make the workspace and writable mounts (as the host prepared them) the sandbox user's, without
    following any link inside them. Call only while no process of the sandbox runs."""
    if uid is None:
        return
    for root in _writable_roots(config):
        chown_tree(root, uid, uid)


def hand_back(config: SandboxConfig, uid: int | None) -> None:
    """Give what the sandbox user owns in its writable folders back to the host's user, so the uid owns
    nothing once the sandbox is closed and can be given out again."""
    if uid is None:
        return
    for root in _writable_roots(config):
        chown_tree(root, os.getuid(), os.getgid())
