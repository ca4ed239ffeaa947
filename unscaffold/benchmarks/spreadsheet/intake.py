"""Take the student's output workbook out of the workspace as a hostile artifact.

The workspace is the student's: a name there may be a symbolic link to the golden workbook or to a
host file, a FIFO that blocks a reader, a device, or a file of gigabytes. The file is opened component
by component from the workspace folder with no link followed, must be a regular file within the size
limit, and is copied to a private folder; scoring only ever reads that copy.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from unscaffold.benchmarks.spreadsheet.bounded import size_text

_KINDS = {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a device",
          stat.S_IFBLK: "a device", stat.S_IFLNK: "a symbolic link"}


class Refused(Exception):
    """The artifact is missing or not something the scorer reads; the message says which, in words."""

    def __init__(self, message: str, *, link: bool = False) -> None:
        super().__init__(message)
        self.link = link  # a refused link is recorded: the trial must not become training data


def copy_out(workspace: Path, relative: str, dest: Path, max_bytes: int) -> None:
    """Copy workspace/relative to dest, following no link on the way; raises Refused."""
    parts = Path(relative).parts
    if not parts or any(p in ("..", "/") for p in parts):
        raise Refused(f"{relative} is not a path inside the workspace")
    fds: list[int] = []
    try:
        fds.append(os.open(workspace, os.O_RDONLY | os.O_DIRECTORY))
        for i, part in enumerate(parts):
            shown = "/".join(parts[: i + 1])
            last = i == len(parts) - 1
            try:
                info = os.stat(part, dir_fd=fds[-1], follow_symlinks=False)
            except FileNotFoundError:
                raise Refused(f"output file {relative} not found") from None
            kind = stat.S_IFMT(info.st_mode)
            if kind == stat.S_IFLNK:
                raise Refused(f"{shown} is a symbolic link; the scorer follows no links", link=True)
            if kind != (stat.S_IFREG if last else stat.S_IFDIR):
                raise Refused(f"{shown} is {_KINDS.get(kind, 'not a regular file')}, not "
                              + ("a regular file" if last else "a folder"))
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | (0 if last else os.O_DIRECTORY)
            try:
                fds.append(os.open(part, flags, dir_fd=fds[-1]))
            except OSError as e:  # swapped for a link or a FIFO since the check
                if e.errno == errno.ELOOP:
                    raise Refused(f"{shown} is a symbolic link; the scorer follows no links", link=True) from None
                raise Refused(f"{shown} cannot be opened: {e.strerror}") from None
        info = os.fstat(fds[-1])
        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"{relative} is not a regular file")
        if info.st_size > max_bytes:
            raise Refused(f"{relative} is {size_text(info.st_size)}, over the {size_text(max_bytes)} limit")
        with open(fds.pop(), "rb") as src, open(dest, "wb") as out:
            data = src.read(max_bytes + 1)
            if len(data) > max_bytes:
                raise Refused(f"{relative} grew over the {size_text(max_bytes)} limit while being read")
            out.write(data)
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def take_out(workspace: Path, relative: str, dest: Path, max_bytes: int) -> Path | Refused:
    """`dest` holding the copy, or the refusal saying why there is none."""
    try:
        copy_out(workspace, relative, dest, max_bytes)
    except Refused as e:
        return e
    return dest
