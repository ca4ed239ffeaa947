"""Shared test helpers: paths, sandbox availability, replay entries and checks used by many test files
(conftest.py keeps only fixtures)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
HARBOR_EXAMPLES = EXAMPLES / "harbor"
HARBOR_REPLAY = EXAMPLES / "replay" / "harbor_student.json"


def message_of(error: type[BaseException], fn: Callable[..., object], *args: object) -> str:
    """The message `fn(*args)` fails with; the test fails where it raises nothing, or another error."""
    with pytest.raises(error) as raised:
        fn(*args)
    return str(raised.value)


def bwrap_usable() -> bool:
    if shutil.which("bwrap") is None:
        return False
    probe = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--unshare-pid", "true"], capture_output=True)
    return probe.returncode == 0


BWRAP = bwrap_usable()
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")  # for the HTML pages' tests


def rendered_dom(page: Path, fragment: str, tmp_path: Path) -> str:
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", f"file://{page}#{fragment}"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-500:]
    return result.stdout


needs_bwrap = pytest.mark.skipif(not BWRAP, reason="bubblewrap is not installed or not usable here")


def call(command: str) -> dict[str, Any]:
    """A replay entry that runs one command."""
    return {"tool_call": {"name": "execute", "arguments": {"command": command}}}


def final(text: str) -> dict[str, Any]:
    return {"content": text}


def assert_k_current(bank: Path, shipped: Path, tmp_path: Path) -> None:
    """A shipped K must be exactly what compiling its bank gives now (same files, same text)."""
    from unscaffold.knowledge.compiler import compile_k

    compile_k(bank, tmp_path / "K", verify=False)
    fresh = sorted(p.relative_to(tmp_path / "K") for p in (tmp_path / "K").rglob("*") if p.is_file())
    assert fresh == sorted(p.relative_to(shipped) for p in shipped.rglob("*") if p.is_file())
    for relative in fresh:
        assert (shipped / relative).read_text() == (tmp_path / "K" / relative).read_text(), relative


def eventually(predicate, timeout_s: float = 10.0, interval_s: float = 0.02) -> bool:
    """Poll until `predicate()` holds or the deadline passes (instead of a fixed sleep that a busy
    machine can outlast)."""
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


# A process-limit probe: forks 100 sleepers and prints how many it made, how many were refused, and the pids seen.
FORK_BOMB = ("import os, time\n"
             "made = refused = 0\n"
             "for _ in range(100):\n"
             "    try:\n"
             "        pid = os.fork()\n"
             "    except BlockingIOError:\n"
             "        refused += 1\n"
             "        continue\n"
             "    if pid == 0:\n"
             "        time.sleep(20); os._exit(0)\n"
             "    made += 1\n"
             "print(made, refused, len([p for p in os.listdir('/proc') if p.isdigit()]))\n")


def trained_runs(mask: list[int]) -> list[tuple[int, int]]:
    """(start, end) of each run of trained tokens in a 0/1 mask."""
    runs, start = [], None
    for i, bit in enumerate([*mask, 0]):
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            runs.append((start, i))
            start = None
    return runs


def on_suite_path(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """Suite folders under `root` join the registry for one test; a package of the same name that an earlier
    test imported is out of sight while it runs, so each test imports its own folder."""
    import sys

    from unscaffold.suites import SEARCH_PATH

    monkeypatch.setenv(SEARCH_PATH, str(root))
    monkeypatch.setattr(sys, "path", list(sys.path))
    folders = {p.name for p in root.iterdir() if p.is_dir()}
    for name in [m for m in sys.modules if m.partition(".")[0] in folders]:
        monkeypatch.delitem(sys.modules, name)
