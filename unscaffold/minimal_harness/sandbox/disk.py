"""A filesystem of fixed size for one sandbox's writable folders: disk bounded as it is written.

A bind-mounted host folder has no quota of its own, so a check after each command comes too late (one
`fallocate` reserves gigabytes at once) and misses every writable folder but the workspace. As root,
the workspace and each writable mount are instead shown from one filesystem made for the sandbox (an
ext4 image on a loop device, or else a size-limited tmpfs): a write past its size fails with "No
space left on device", whichever folder it lands in. Each folder keeps its path on the host (the
scorer reads it there) through a bind mount over it; closing unmounts everything and deletes the
image, so nothing of the trial is left on the host unless asked to copy it back.

Many trials start at once, so a trial's filesystem costs no program start where it can be avoided: the
empty ext4 image is made once per process and size (`mkfs` then runs once, not per trial) and copied
extent by extent, and it is attached to a loop device and mounted through system calls."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import fcntl
import functools
import os
import shutil
import socket
import stat
import struct
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from unscaffold.minimal_harness.sandbox import owner
from unscaffold.minimal_harness.sandbox.base import SandboxConfig

_SBIN = "/usr/sbin:/sbin:/usr/bin:/bin"
_PREFIX = "unscaffold-disk-"  # then the owner's token (pid.start) of the process that made it
_TEMPLATE_PREFIX = "unscaffold-ext4-"  # the process's empty images, copied for each trial; then its token
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MNT_DETACH = 2, 4, 4096, 2
_LOOP_CTL_GET_FREE, _LOOP_CONFIGURE, _LO_FLAGS_AUTOCLEAR, _LOOP_MAJOR = 0x4C82, 0x4C0A, 4, 7
# struct loop_config: fd, block size, struct loop_info64 (device, inode, rdevice, offset, size limit, number,
# encryption type and key size, flags, file name, crypt name, key, init), reserved.
_LOOP_CONFIG = struct.Struct("=II5Q4I64s64s32s2Q8Q")
_templates: dict[tuple[int, int], Path] = {}
_template_lock = threading.Lock()
_loop_lock = threading.Lock()
# The image's unwritten inode tables are holes, which read as zeros already: no kernel thread zeroing
# them (megabytes of writes per trial, all trials at once).
_EXT4_OPTIONS = b"noinit_itable"


@functools.cache
def _tool(name: str) -> str | None:
    """Looked up once per process: each lookup walks PATH, and every trial asks for two tools."""
    return shutil.which(name) or shutil.which(name, path=_SBIN)


def _run(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


_swept: list[bool] = []


def _sweep() -> None:
    """Remove what a process that died mid-trial left: its filesystem's folder (and mount, if any; the
    loop device detaches itself once unmounted). Its owner is told by pid and start time, so a pid given
    to another process since does not keep it. Once per process: what dies later is the next process's to
    remove, and many trials start at once."""
    with _template_lock:
        if _swept:
            return
        _swept.append(True)
    folders = [(home, prefix) for home in Path(tempfile.gettempdir()).glob("unscaffold-*-*")
               for prefix in (_PREFIX, _TEMPLATE_PREFIX) if home.name.startswith(prefix)]  # one listing
    for home, prefix in folders:
        if owner.alive(home.name[len(prefix):].split("-")[0]):
            continue  # its process still runs (or the name is not one of ours)
        if os.path.ismount(home / "mnt"):
            for point in _same_device_mounts(home / "mnt"):  # the trial folders shown from it, then itself
                _unmount(point)
        shutil.rmtree(home, ignore_errors=True)


@functools.cache
def _libc() -> ctypes.CDLL:
    """Loaded once per process (each load builds its classes anew); errno stays per thread."""
    return ctypes.CDLL(None, use_errno=True)


def _bind(source: Path, target: Path) -> None:
    """`mount --bind` as one system call (a program per mount costs more than the mount)."""
    if _libc().mount(str(source).encode(), str(target).encode(), None, _MS_BIND, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"could not mount the sandbox's filesystem over {target}: {os.strerror(err)}")


def _template(mkfs: str, size_bytes: int, entries: int) -> Path | None:
    """An empty ext4 image of this size, made once per process (None if mkfs fails): a trial's
    filesystem is a copy of it, a few MB of metadata, never mounted before."""
    key = (size_bytes, entries)
    with _template_lock:
        if key in _templates and _templates[key].exists():
            return _templates[key]
        folder = Path(tempfile.mkdtemp(prefix=f"{_TEMPLATE_PREFIX}{owner.token()}-"))  # private to root
        atexit.register(_remove_template, folder, os.getpid())
        image = folder / "disk.img"
        with open(image, "wb") as f:
            f.truncate(size_bytes)  # sparse: the host disk holds only what is written
        if not _run([mkfs, "-q", "-F", "-m", "0", "-N", str(entries + 1024), "-O", "^has_journal",
                     "-E", "lazy_itable_init=1,nodiscard", str(image)]):
            shutil.rmtree(folder, ignore_errors=True)
            return None
        _templates[key] = image
        return image


def _remove_template(folder: Path, pid: int) -> None:
    """At exit, by the process that made it only (a forked child leaves its parent's images alone)."""
    if os.getpid() == pid:
        shutil.rmtree(folder, ignore_errors=True)


def _copy_sparse(source: Path, target: Path) -> None:
    """Copy the data extents only (SEEK_DATA/SEEK_HOLE): the copy is as sparse as the source."""
    size = source.stat().st_size
    with open(source, "rb") as src, open(target, "wb") as dst:
        dst.truncate(size)
        offset = 0
        while offset < size:
            try:
                start = os.lseek(src.fileno(), offset, os.SEEK_DATA)
            except OSError as e:  # ENXIO: no data after offset
                if e.errno == errno.ENXIO:
                    return
                raise
            end = os.lseek(src.fileno(), start, os.SEEK_HOLE)
            while start < end:
                copied = os.copy_file_range(src.fileno(), dst.fileno(), end - start, start, start)
                if copied <= 0:
                    raise OSError(errno.EIO, f"could not copy {source}")
                start += copied
            offset = end


def _loop_mount(image: Path, target: Path) -> bool:
    """Attach `image` to a free loop device that detaches itself once unmounted, and mount it: system
    calls, not the `mount` program (a program start per trial, and it reads the whole mount table).

    One trial at a time per process: the kernel names the same free device to every thread that asks
    at once, and attaching and mounting many at once contend in the kernel with each other and with the
    sandboxes starting meanwhile (perf/harness_overhead.py, 64 trials at once: more trials a second
    and less CPU a trial one at a time than all together)."""
    try:
        ctl = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        backing = os.open(image, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        os.close(ctl)
        return False
    try:
        config = _LOOP_CONFIG.pack(backing, 0, 0, 0, 0, 0, 0, 0, 0, 0, _LO_FLAGS_AUTOCLEAR,
                                   str(image).encode()[:63], b"", b"", 0, 0, *[0] * 8)
        with _loop_lock:
            for _ in range(64):  # another process may take the free device first
                number = fcntl.ioctl(ctl, _LOOP_CTL_GET_FREE)
                device = f"/dev/loop{number}"
                try:
                    loop = os.open(device, os.O_RDWR | os.O_CLOEXEC)
                except FileNotFoundError:  # no udev here to make its node
                    os.mknod(device, 0o660 | stat.S_IFBLK, os.makedev(_LOOP_MAJOR, number))
                    loop = os.open(device, os.O_RDWR | os.O_CLOEXEC)
                try:
                    fcntl.ioctl(loop, _LOOP_CONFIGURE, config)
                except OSError as e:
                    os.close(loop)
                    if e.errno == errno.EBUSY:
                        continue
                    return False
                try:  # closing the device afterwards detaches it if the mount failed (autoclear)
                    return _libc().mount(device.encode(), str(target).encode(), b"ext4", _MS_NOSUID | _MS_NODEV,
                                         _EXT4_OPTIONS) == 0
                finally:
                    os.close(loop)
        return False
    except OSError:
        return False
    finally:
        os.close(backing)
        os.close(ctl)


def _unmount(path: Path) -> None:
    """Unmount `path`; lazily if something still holds it (it is gone from the tree either way)."""
    libc = _libc()
    if libc.umount2(str(path).encode(), 0) != 0:
        libc.umount2(str(path).encode(), _MNT_DETACH)


def _mount_table() -> list[tuple[str, Path]]:
    """(major:minor, mount point) of every mount this process sees."""
    rows: list[tuple[str, Path]] = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as table:
            for line in table:
                fields = line.split(" ")
                rows.append((fields[2], Path(fields[4].encode().decode("unicode_escape"))))  # \040: a space
    except OSError:
        return []
    return rows


def _same_device_mounts(point: Path) -> list[Path]:
    """Every mount of the filesystem mounted at `point` (its bind mounts included), deepest first, `point` last."""
    table = _mount_table()
    device = next((dev for dev, where in table if where == Path(os.path.realpath(point))), None)
    found = {where for dev, where in table if dev == device} if device else {point}
    return sorted(found, key=lambda p: (p == point, -len(p.parts)))


def mounts_below(path: Path) -> list[Path]:
    """Mount points at or under `path`, deepest first (from this process's mount table)."""
    root = Path(os.path.realpath(path))
    found = {where for _, where in _mount_table() if where == root or root in where.parents}
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def unmount_below(path: Path) -> None:
    """What a trial killed mid-way left mounted in its folder (as root), so the folder can be removed."""
    if os.geteuid() != 0:
        return
    for point in mounts_below(path):
        _unmount(point)


@dataclass
class TrialDisk:
    """The filesystem and the folders shown from it; `kind` says which filesystem it is, in words."""

    home: Path  # private to root: the image and the filesystem's own mount point
    roots: list[Path]
    kind: str
    bound: list[Path]

    @classmethod
    def create(cls, roots: list[Path], size_bytes: int, entries: int) -> TrialDisk | None:
        """Move `roots` (existing host folders) onto a fresh filesystem of `size_bytes`; None when not
        root or no filesystem can be made here (the sandbox then says its disk is checked after the fact)."""
        mount = _tool("mount")
        if os.geteuid() != 0 or mount is None:
            return None
        _sweep()
        home = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{owner.token()}-"))
        disk = cls(home=home, roots=[Path(r).resolve() for r in roots], kind="", bound=[])
        try:
            if not disk._mount(mount, size_bytes, entries):
                disk.close()
                return None
            disk._show()
        except BaseException:
            disk.close()
            raise
        return disk

    @property
    def top(self) -> Path:
        return self.home / "mnt"

    def _mount(self, mount: str, size_bytes: int, entries: int) -> bool:
        self.top.mkdir()
        image, mkfs = self.home / "disk.img", _tool("mkfs.ext4")
        template = _template(mkfs, size_bytes, entries) if mkfs is not None else None
        if template is not None:
            _copy_sparse(template, image)
            if _loop_mount(image, self.top) or _run([mount, "-o", "loop,nosuid,nodev", str(image), str(self.top)]):
                image.unlink()  # the loop device holds it open; nothing is left once it is unmounted
                self.kind = f"an ext4 image of {size_bytes / 1024**3:g} GiB"
                return True
            image.unlink(missing_ok=True)
        if _run([mount, "-t", "tmpfs", "-o", f"size={size_bytes},mode=0755,nosuid,nodev", "tmpfs", str(self.top)]):
            self.kind = f"a tmpfs of {size_bytes / 1024**3:g} GiB (in memory)"
            return True
        return False

    def _show(self) -> None:
        """Move each folder's current files onto the filesystem, then show it at the folder's path (the
        host folder underneath is left empty: it receives files again only if they are kept)."""
        for i, root in enumerate(self.roots):
            inside = self.top / str(i)
            shutil.copytree(root, inside, symlinks=True)
            for entry in list(root.iterdir()):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
            _bind(inside, root)
            self.bound.append(root)

    def close(self, keep: bool = False) -> None:
        """Unmount everything and delete the image; with `keep`, first copy each folder's files back to
        the host folder underneath (which then holds them owned by the host's user)."""
        for i, root in reversed(list(enumerate(self.bound))):
            _unmount(root)
            if keep:
                with contextlib.suppress(OSError):
                    shutil.copytree(self.top / str(i), root, symlinks=True, dirs_exist_ok=True)
        self.bound = []
        if os.path.ismount(self.top):
            _unmount(self.top)
        shutil.rmtree(self.home, ignore_errors=True)


@functools.cache
def engine_shares_mounts() -> bool:
    """Whether the Docker engine `DOCKER_HOST` names (its socket's peer) runs in this process's mount
    namespace, so that a bind mount of a trial folder shows the trial's filesystem mounted there rather
    than the empty folder underneath. Asked once per process; an engine elsewhere (tcp://) does not."""
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not host.startswith("unix://"):
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(host[len("unix://"):])
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid = struct.unpack("3i", creds)[0]
        return os.stat(f"/proc/{pid}/ns/mnt").st_ino == os.stat("/proc/self/ns/mnt").st_ino
    except OSError:
        return False


def open_trial_disk(config: SandboxConfig) -> TrialDisk | None:
    """The trial's filesystem for a `local` sandbox run as root, or a `docker` one whose engine shares this
    host's mounts (None otherwise: the workspace's size is then checked after every command only, and a
    docker trial's isolation says its disk is not bounded). A folder where a service of the host already
    listens (a socket, as AppWorld's bridge makes in `prepare`) cannot move, so such a trial keeps the
    host's."""
    if config.kind not in ("local", "docker") or os.geteuid() != 0:
        return None
    if config.kind == "docker" and not engine_shares_mounts():
        return None
    roots = [Path(config.workspace)] + [Path(m.source) for m in config.mounts if m.writable]
    for root in roots:
        root.mkdir(parents=True, exist_ok=True)
    if any(_has_socket(root) for root in roots):
        return None
    return TrialDisk.create(roots, config.limits.workspace_bytes, config.limits.workspace_entries)


def _has_socket(root: Path) -> bool:
    for folder, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(os.lstat(os.path.join(folder, name)).st_mode):
                    return True
    return False


def disk_note(disk: TrialDisk, keep: bool) -> str:
    """The disk's part of a trial's `isolation`."""
    return f"; the workspace and writable folders on {disk.kind} of their own, {'kept' if keep else 'dropped'} after"
