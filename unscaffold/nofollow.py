"""Copying files from an untrusted folder (a downloaded task) into a trial's own folders, as root.

A link in such a folder may point at a host file or folder (a root-only file, `/`, `/etc/cron.d`): a
copy that follows it reads the host for the student, and a copy whose target path runs through it
writes the host. So both sides are walked component by component through directory handles with
`O_NOFOLLOW`: a link met on either side is refused, never followed, and so is anything but a folder
or a regular file (a FIFO would block the copy, a device never ends)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from unscaffold.untrusted import UntrustedFileError, size_text

MAX_DEPTH = 64  # folders nested deeper are refused (a task's files are never that deep)
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device"}


class RefusedPath(UntrustedFileError):
    """A path that was not read or written: `path` and `problem` apart, for one-line input errors."""

    def __init__(self, path: Path, problem: str, *, refused: bool = True, link: bool = False) -> None:
        super().__init__(f"{path}: {problem}", refused=refused, link=link)
        self.path, self.problem = path, problem


def _parts(relative: str) -> list[str]:
    """The components of a relative path (`.` for the root itself); `..` and absolute paths refused."""
    path = PurePosixPath(relative)
    if path.is_absolute() or ".." in path.parts:
        raise RefusedPath(Path(relative), "not a path inside its folder")
    return [p for p in path.parts if p != "."]


def _refuse(shown: Path, kind: int) -> RefusedPath:
    if kind == stat.S_IFLNK:
        return RefusedPath(shown, "a symbolic link (never followed)", link=True)
    if kind == stat.S_IFREG:
        return RefusedPath(shown, "a file, not a folder")
    return RefusedPath(shown, f"{_KINDS.get(kind, 'not a regular file')}, not a file or a folder")


def _open_dir(fd: int | None, name: str | Path, shown: Path) -> int:
    try:
        return os.open(name, _DIR, dir_fd=fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            kind = stat.S_IFMT(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
            raise _refuse(shown, kind) from None
        if e.errno == errno.ENOENT:
            raise RefusedPath(shown, "not found", refused=False) from None
        raise RefusedPath(shown, f"cannot be opened: {e.strerror}", refused=False) from None


@contextlib.contextmanager
def _descend(root: Path, parts: list[str], *, create: bool) -> Iterator[int]:
    """A handle of the folder `root/parts...`, reached with no link followed (made on the way with
    `create`)."""
    fd = _open_dir(None, root, root)
    try:
        shown = root
        for part in parts:
            shown = shown / part
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            child = _open_dir(fd, part, shown)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def check_tree(root: Path) -> None:
    """Raise RefusedPath naming the first link, or entry that is neither a folder nor a regular
    file, at or below `root` (which must be a folder)."""
    def walk(fd: int, shown: Path, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise RefusedPath(shown, f"nested more than {MAX_DEPTH} folders deep")
        for name in sorted(os.listdir(fd)):
            kind = stat.S_IFMT(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
            if kind == stat.S_IFDIR:
                child = _open_dir(fd, name, shown / name)
                try:
                    walk(child, shown / name, depth + 1)
                finally:
                    os.close(child)
            elif kind != stat.S_IFREG:
                raise _refuse(shown / name, kind)

    fd = _open_dir(None, root, root)
    try:
        walk(fd, root, 0)
    finally:
        os.close(fd)


def copy_in(source_root: Path, source: str, dest_root: Path, dest: str) -> None:
    """Copy `source_root/source` (a regular file, or a folder's contents, merged) to `dest_root/dest`.
    No link is followed on either side: one met, in the source or in the target's path, raises
    RefusedPath naming it. Files keep their permission bits (never set-id) and times."""
    src_parts, dest_parts = _parts(source), _parts(dest)
    if not src_parts:
        with _descend(source_root, [], create=False) as src, _descend(dest_root, dest_parts, create=True) as out:
            _copy_folder(src, out, source_root, 0)
        return
    with _descend(source_root, src_parts[:-1], create=False) as parent:
        name, shown = src_parts[-1], source_root.joinpath(*src_parts)
        try:
            kind = stat.S_IFMT(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            raise RefusedPath(shown, "not found", refused=False) from None
        if kind == stat.S_IFDIR:
            src = _open_dir(parent, name, shown)
            try:
                with _descend(dest_root, dest_parts, create=True) as out:
                    _copy_folder(src, out, shown, 0)
            finally:
                os.close(src)
        elif kind == stat.S_IFREG:
            if not dest_parts:
                raise RefusedPath(dest_root, "a folder: a file cannot be copied over it")
            with _descend(dest_root, dest_parts[:-1], create=True) as out:
                _copy_file(parent, name, shown, out, dest_parts[-1], dest_root.joinpath(*dest_parts))
        else:
            raise _refuse(shown, kind)


def _copy_folder(src: int, out: int, shown: Path, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise RefusedPath(shown, f"nested more than {MAX_DEPTH} folders deep")
    for name in sorted(os.listdir(src)):
        info = os.stat(name, dir_fd=src, follow_symlinks=False)
        kind = stat.S_IFMT(info.st_mode)
        if kind == stat.S_IFDIR:
            child = _open_dir(src, name, shown / name)
            try:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=out)
                target = _open_dir(out, name, shown / name)
                try:
                    _copy_folder(child, target, shown / name, depth + 1)
                    os.fchmod(target, stat.S_IMODE(info.st_mode) & 0o777 | 0o700)
                finally:
                    os.close(target)
            finally:
                os.close(child)
        elif kind == stat.S_IFREG:
            _copy_file(src, name, shown / name, out, name, shown / name)
        else:
            raise _refuse(shown / name, kind)


def _open_file(src_dir: int, name: str, shown: Path) -> tuple[int, os.stat_result]:
    """A blocking read-only handle of a regular file, opened with no link followed (a link swapped in since
    any check is refused by the kernel; a FIFO is not waited on)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=src_dir)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _refuse(shown, stat.S_IFLNK) from None
        if e.errno == errno.ENOENT:
            raise RefusedPath(shown, "not found", refused=False) from None
        raise RefusedPath(shown, f"cannot be opened: {e.strerror}", refused=False) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise _refuse(shown, stat.S_IFMT(info.st_mode))
    os.set_blocking(fd, True)
    return fd, info


def read_text(root: Path, relative: str, max_bytes: int) -> str:
    """The text of the regular file `root/relative`, reached with no link followed; refused past
    `max_bytes`."""
    parts = _parts(relative)
    if not parts:
        raise RefusedPath(root, "a folder, not a file")
    shown = root.joinpath(*parts)
    with _descend(root, parts[:-1], create=False) as parent:
        fd, info = _open_file(parent, parts[-1], shown)
        with open(fd, "rb") as f:
            data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise RefusedPath(shown, f"larger than {size_text(max_bytes)}")
    return data.decode("utf-8", errors="replace")


def _copy_bytes(source: int, target: int, size: int) -> None:
    """Copy in the kernel (`copy_file_range`, else `sendfile`), on to the end even if the file grew."""
    copy = getattr(os, "copy_file_range", None)
    while True:
        try:
            done = copy(source, target, 1 << 30) if copy is not None else os.sendfile(target, source, None, 1 << 30)
        except OSError as e:
            if copy is None or e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            copy = None  # across filesystems on an older kernel: sendfile
            continue
        if done == 0:
            return


def _copy_file(src_dir: int, name: str, shown: Path, out_dir: int, out_name: str, shown_out: Path) -> None:
    """One regular file, opened with no link followed on either side."""
    fd, info = _open_file(src_dir, name, shown)
    try:
        try:
            target = os.open(out_name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                             dir_fd=out_dir)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise _refuse(shown_out, stat.S_IFLNK) from None
            raise RefusedPath(shown_out, f"cannot be written: {e.strerror}", refused=False) from None
        try:
            _copy_bytes(fd, target, info.st_size)
            os.fchmod(target, stat.S_IMODE(info.st_mode) & 0o777)
            os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(target)
    finally:
        os.close(fd)
