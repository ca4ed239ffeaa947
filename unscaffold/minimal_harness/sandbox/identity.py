"""Who a sandbox's commands run as: never root.

When the host runs as root, each live sandbox gets a user id of its own (no name, no groups, no
capabilities) and its writable folders are handed to that id. A uid of its own is what makes the
process limit hold: the kernel counts processes per uid and ignores the limit for root altogether.
As an ordinary user, commands keep that user's id inside a user namespace with no capabilities."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from unscaffold.minimal_harness.sandbox.base import SandboxConfig

# A range far above any distribution's users; each process of the host takes its own block.
UID_BASE = 1_610_000_000
UID_BLOCK = 4096
_lock = threading.Lock()
_in_use: set[int] = set()


def host_is_root() -> bool:
    return os.geteuid() == 0


def allocate_uid() -> int | None:
    """A uid no other live sandbox of this host process holds; None when not root (nothing to switch)."""
    if not host_is_root():
        return None
    base = UID_BASE + (os.getpid() % 100_000) * UID_BLOCK
    with _lock:
        for slot in range(UID_BLOCK):
            if base + slot not in _in_use:
                _in_use.add(base + slot)
                return base + slot
    raise RuntimeError(f"more than {UID_BLOCK} live sandboxes in one process")


def release_uid(uid: int | None) -> None:
    if uid is not None:
        with _lock:
            _in_use.discard(uid)


def hand_over(config: SandboxConfig, uid: int | None) -> None:
    """Make the workspace and writable mounts (as the host prepared them) the sandbox user's, without
    following any link inside them."""
    if uid is None:
        return
    for root in [Path(config.workspace)] + [Path(m.source) for m in config.mounts if m.writable]:
        if not root.exists() or root.is_symlink():
            continue
        os.lchown(root, uid, uid)
        for folder, dirs, files in os.walk(root):
            for name in dirs + files:
                os.lchown(os.path.join(folder, name), uid, uid)
