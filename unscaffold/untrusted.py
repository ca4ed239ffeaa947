"""Reading what a student left in its workspace: as hostile input.

A student controls every name under its workspace. A link there may point at a host file (or at the
gold answer), a FIFO would block the reader, and a file may be gigabytes. So no link is followed at
any level, only regular files are read, and every read has a size limit; a refusal says why."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

REFUSED = "refused_artifact"  # key of a score's details naming an artifact that was refused


class UntrustedFileError(Exception):
    """A student artifact that was refused or is missing; the message is a sentence for `reason`.
    `refused`: the artifact exists but was not read (a link, a special file, too large): such a trial
    never becomes training data."""

    def __init__(self, message: str, refused: bool = True) -> None:
        super().__init__(message)
        self.refused = refused


def _open_no_follow(root: Path, relative: str) -> int:
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or ".." in parts:
        raise UntrustedFileError(f"{relative} is not a plain relative path")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_NONBLOCK if last else os.O_DIRECTORY)
            try:
                child = os.open(name, flags, dir_fd=fd)
            except FileNotFoundError:
                raise UntrustedFileError(f"{relative} does not exist", refused=False) from None
            except OSError as e:
                shown = "/".join(parts[: i + 1])
                if e.errno in (40, 20):  # ELOOP: a link; ENOTDIR: a link or file where a folder should be
                    raise UntrustedFileError(f"{shown} is a symbolic link or not a folder: refused") from None
                raise UntrustedFileError(f"{shown} could not be opened: {e.strerror}") from None
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_untrusted(root: Path, relative: str, max_bytes: int) -> bytes:
    """The bytes of `root/relative`, refusing links anywhere on the way, non-regular files and files over
    `max_bytes`."""
    fd = _open_no_follow(root, relative)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UntrustedFileError(f"{relative} is not a regular file: refused")
        if st.st_size > max_bytes:
            raise UntrustedFileError(f"{relative} is {st.st_size:,} bytes, over the limit of {max_bytes:,}")
        os.set_blocking(fd, True)
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise UntrustedFileError(f"{relative} grew over the limit of {max_bytes:,} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_untrusted_text(root: Path, relative: str, max_bytes: int) -> str:
    return read_untrusted(root, relative, max_bytes).decode("utf-8", errors="replace")


def copy_untrusted(root: Path, relative: str, dest: Path, max_bytes: int) -> Path:
    """A private copy of a student artifact (for parsers that want a path), with the same checks."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(read_untrusted(root, relative, max_bytes))
    return dest


def clear_folder(folder: Path) -> None:
    """Remove everything inside `folder` (never following links), keeping the folder itself: it may be
    a mount point a sandbox still shows."""
    import shutil

    with os.scandir(folder) as it:
        for entry in it:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
