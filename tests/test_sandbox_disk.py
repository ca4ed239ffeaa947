"""The trial filesystem's fast path (a copied empty image, a loop device attached by system calls) and the
workspace watchdog's use of the filesystem's own counts."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from unscaffold.minimal_harness.sandbox import disk, watchdog
from unscaffold.minimal_harness.sandbox.base import Limits
from unscaffold.minimal_harness.sandbox.watchdog import workspace_overflow

ROOT_WITH_LOOP = os.geteuid() == 0 and Path("/dev/loop-control").exists() and disk._tool("mkfs.ext4") is not None


def fake_statvfs(used_blocks: int, used_files: int):
    return lambda path: SimpleNamespace(f_blocks=1_000_000, f_bfree=1_000_000 - used_blocks, f_frsize=4096,
                                        f_files=500_000, f_ffree=500_000 - used_files)


def test_watchdog_skips_the_walk_when_the_filesystem_is_within_the_limits(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "big.bin").write_bytes(b"x" * 300_000)
    limits = Limits(workspace_bytes=100_000)
    monkeypatch.setattr(watchdog.os, "statvfs", fake_statvfs(used_blocks=20, used_files=10))  # 80 KiB in all
    assert workspace_overflow(tmp_path, limits) is None
    monkeypatch.setattr(watchdog.os, "statvfs", fake_statvfs(used_blocks=200, used_files=10))  # over: walk
    assert workspace_overflow(tmp_path, limits) == "the workspace grew past 0 MiB"


def test_watchdog_walks_when_the_filesystem_holds_more_entries_than_allowed(tmp_path: Path, monkeypatch) -> None:
    for i in range(5):
        (tmp_path / f"f{i}").touch()
    monkeypatch.setattr(watchdog.os, "statvfs", fake_statvfs(used_blocks=1, used_files=50))
    assert workspace_overflow(tmp_path, Limits(workspace_entries=40)) is None  # 5 found by the walk
    assert workspace_overflow(tmp_path, Limits(workspace_entries=4)) == (
        "the workspace holds more than 4 files and folders")


def test_watchdog_walks_where_the_filesystem_keeps_no_inode_counts(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "big.bin").write_bytes(b"x" * 300_000)
    monkeypatch.setattr(watchdog.os, "statvfs", lambda path: SimpleNamespace(
        f_blocks=10, f_bfree=10, f_frsize=4096, f_files=0, f_ffree=0))
    assert workspace_overflow(tmp_path, Limits(workspace_bytes=100_000)) == "the workspace grew past 0 MiB"


def test_copy_sparse_keeps_the_holes(tmp_path: Path) -> None:
    source, target = tmp_path / "src.img", tmp_path / "dst.img"
    with open(source, "wb") as f:
        f.truncate(64 * 1024 * 1024)
        f.write(b"a" * 8192)
        f.seek(40 * 1024 * 1024)
        f.write(b"b" * 4096)
    disk._copy_sparse(source, target)
    assert target.stat().st_size == source.stat().st_size
    assert target.read_bytes() == source.read_bytes()
    assert target.stat().st_blocks <= source.stat().st_blocks + 16  # holes stay holes


@pytest.mark.skipif(not ROOT_WITH_LOOP, reason="needs root, /dev/loop-control and mkfs.ext4")
def test_trial_disks_copy_one_image_and_mount_without_programs(tmp_path: Path, monkeypatch) -> None:
    ran: list[list[str]] = []
    real_run = disk._run
    monkeypatch.setattr(disk, "_run", lambda argv: ran.append(argv) or real_run(argv))
    monkeypatch.setattr(disk, "_templates", {})
    roots = [tmp_path / "a", tmp_path / "b"]
    for root in roots:
        root.mkdir()
    (roots[0] / "kept.txt").write_text("host file")
    first = disk.TrialDisk.create([roots[0]], 64 * 1024 * 1024, 1000)
    second = disk.TrialDisk.create([roots[1]], 64 * 1024 * 1024, 1000)
    assert first is not None and second is not None
    try:
        assert [Path(argv[0]).name for argv in ran] == ["mkfs.ext4"]  # once, for both; no `mount` program
        mounts = {line.split()[1]: line.split() for line in Path("/proc/mounts").read_text().splitlines()}
        for d in (first, second):
            device, _, kind, options = mounts[str(d.top)][:4]
            assert device.startswith("/dev/loop") and kind == "ext4"
            assert {"nosuid", "nodev"} <= set(options.split(","))
        assert mounts[str(first.top)][0] != mounts[str(second.top)][0]
        assert (roots[0] / "kept.txt").read_text() == "host file"
        assert not (first.home / "disk.img").exists()  # the loop device holds the only reference
        assert first.kind == "an ext4 image of 0.0625 GiB"
    finally:
        first.close()
        second.close()
    mounted = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    assert str(first.top) not in mounted and str(roots[0]) not in mounted and not first.home.exists()
