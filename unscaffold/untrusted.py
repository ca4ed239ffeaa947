"""Reading what a student left in its workspace: as hostile input.

A student controls every name under its workspace. A link there may point at a host file (or at the
gold answer), a FIFO would block the reader, a device never ends, and a file may be gigabytes. So the
path is walked component by component from the trusted root with no link followed, only a regular file
is read, and every read has a size limit; a refusal says why, in words."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from pathlib import Path, PurePosixPath

REFUSED = "refused_artifact"  # key of a score's details naming an artifact that was refused
_KINDS = {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a device",
          stat.S_IFBLK: "a device", stat.S_IFLNK: "a symbolic link"}


def size_text(n: int) -> str:
    """Bytes in the unit a person reads: `512 bytes`, `40 KB`, `64 MB`."""
    for unit, shift in (("GB", 30), ("MB", 20), ("KB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} bytes"


class UntrustedFileError(Exception):
    """A student artifact that was refused or is missing; the message is a sentence for `reason`.
    `refused`: it exists but was not read (a link, a special file, too large): such a trial never becomes
    training data. `link`: the refusal was a symbolic link."""

    def __init__(self, message: str, *, refused: bool = True, link: bool = False) -> None:
        super().__init__(message)
        self.refused, self.link = refused, link


def _link(shown: str) -> UntrustedFileError:
    return UntrustedFileError(f"{shown} is a symbolic link; the scorer follows no links", link=True)


def open_untrusted(root: Path, relative: str) -> int:
    """A read-only descriptor of the regular file `root/relative`, reached with no link followed."""
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or ".." in parts:
        raise UntrustedFileError(f"{relative} is not a path inside the workspace")
    fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY)]
    try:
        for i, part in enumerate(parts):
            shown, last = "/".join(parts[: i + 1]), i == len(parts) - 1
            try:
                info = os.stat(part, dir_fd=fds[-1], follow_symlinks=False)
            except FileNotFoundError:
                raise UntrustedFileError(f"{relative} not found", refused=False) from None
            kind = stat.S_IFMT(info.st_mode)
            if kind == stat.S_IFLNK:
                raise _link(shown)
            if kind != (stat.S_IFREG if last else stat.S_IFDIR):
                raise UntrustedFileError(f"{shown} is {_KINDS.get(kind, 'not a regular file')}, not "
                                         + ("a regular file" if last else "a folder"))
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | (0 if last else os.O_DIRECTORY)
            try:
                fds.append(os.open(part, flags, dir_fd=fds[-1]))
            except OSError as e:  # swapped for a link or a FIFO since the check
                if e.errno == errno.ELOOP:
                    raise _link(shown) from None
                raise UntrustedFileError(f"{shown} cannot be opened: {e.strerror}") from None
        if not stat.S_ISREG(os.fstat(fds[-1]).st_mode):
            raise UntrustedFileError(f"{relative} is not a regular file")
        return fds.pop()
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def read_untrusted(root: Path, relative: str, max_bytes: int) -> bytes:
    """The bytes of `root/relative`: refused if a link is on the way, if it is not a regular file, or if it
    holds more than `max_bytes`."""
    fd = open_untrusted(root, relative)
    with open(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise UntrustedFileError(f"{relative} is {size_text(size)}, over the {size_text(max_bytes)} limit")
        os.set_blocking(f.fileno(), True)
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UntrustedFileError(f"{relative} grew over the {size_text(max_bytes)} limit while being read")
    return data


def read_untrusted_text(root: Path, relative: str, max_bytes: int) -> str:
    return read_untrusted(root, relative, max_bytes).decode("utf-8", errors="replace")


def copy_untrusted(root: Path, relative: str, dest: Path, max_bytes: int) -> Path:
    """A private copy of a student artifact (for parsers that want a path), with the same checks."""
    data = read_untrusted(root, relative, max_bytes)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)
    return dest


def clear_folder(folder: Path) -> None:
    """Remove everything inside `folder` (never following links), keeping the folder itself: it may be
    a mount point a sandbox still shows."""
    with os.scandir(folder) as it:
        for entry in it:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
