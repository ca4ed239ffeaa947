"""Bounded child processes: exact limits through the exec wrapper, a cgroup joined before the program
starts, and one error type saying which limit was passed."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import unscaffold
import unscaffold.bounded as bounded
from unscaffold.bounded import LimitExceeded, call_bounded, capped, run_bounded, spawn

GIB = 1 << 30


def _limits_seen(rlimits: dict[int, tuple[int, int]]) -> dict[str, tuple[str, str]]:
    proc = spawn(["cat", "/proc/self/limits"], rlimits=rlimits, stdout=subprocess.PIPE)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    rows = {}
    for line in out.decode().splitlines()[1:]:
        name, soft, hard = line[:26].strip(), *line[26:].split()[:2]
        rows[name] = (soft, hard)
    return rows


@pytest.mark.parametrize("prlimit", [True, False], ids=["prlimit", "python"])
def test_the_wrapper_sets_each_limit_exactly(prlimit: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not prlimit:
        monkeypatch.setattr(bounded, "_prlimit", lambda: None)
    elif bounded._prlimit() is None:
        pytest.skip("prlimit (util-linux) is not installed")
    seen = _limits_seen({resource.RLIMIT_AS: (GIB, GIB), resource.RLIMIT_CPU: (5, 6),
                         resource.RLIMIT_FSIZE: (1 << 20, 1 << 20)})
    assert seen["Max address space"] == (str(GIB), str(GIB))
    assert seen["Max cpu time"] == ("5", "6")
    assert seen["Max file size"] == (str(1 << 20), str(1 << 20))


def test_a_limit_is_never_above_the_parents_hard_limit() -> None:
    own = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert capped(resource.RLIMIT_NOFILE, own + 10) == (own, own)
    assert capped(resource.RLIMIT_NOFILE, 64, 32) == (32, 32)


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups are made as root")
def test_the_child_is_in_the_cgroup_before_it_starts(tmp_path: Path) -> None:
    from unscaffold.minimal_harness.sandbox.cgroup import SandboxCgroup

    group = SandboxCgroup.create(f"unscaffold-test-{os.getpid()}", 64, GIB)
    if group is None:
        pytest.skip("no cgroup hierarchy can freeze or kill here")
    try:
        proc = spawn(["cat", "/proc/self/cgroup"], cgroup_procs=group.procs_files(), stdout=subprocess.PIPE)
        out, _ = proc.communicate(timeout=30)
        lines = [line for line in out.decode().splitlines() if line.endswith(f"/unscaffold-test-{os.getpid()}")]
        assert proc.returncode == 0 and len(lines) == len(group.groups)
        missing = spawn(["true"], cgroup_procs=[str(tmp_path / "no-such-group" / "cgroup.procs")],
                        stderr=subprocess.DEVNULL)
        assert missing.wait(timeout=30) == bounded.ATTACH_FAILED  # the program never ran outside its group
    finally:
        group.kill_all()
        group.remove()


def test_a_program_past_its_time_is_stopped_with_its_helpers(tmp_path: Path) -> None:
    marker = tmp_path / "helper-ran"
    with pytest.raises(LimitExceeded) as caught:
        run_bounded(["bash", "-c", f"(sleep 1; touch {marker}) & sleep 30"], what="the probe", time_s=0.3,
                    memory_bytes=GIB)
    assert str(caught.value) == "the probe ran past its 0.3 s time limit and was stopped"
    time.sleep(1.5)
    assert not marker.exists()  # the background helper went with its group


def test_a_program_past_its_memory_says_so() -> None:
    with pytest.raises(LimitExceeded) as caught:
        run_bounded([sys.executable, "-c", "b = bytearray(1 << 30)"], what="the probe", time_s=60,
                    memory_bytes=256 << 20)
    assert str(caught.value) == "the probe ran past its 256 MB memory limit"


def test_a_program_past_its_cpu_time_is_ended_by_sigxcpu() -> None:
    with pytest.raises(LimitExceeded) as caught:
        run_bounded(["bash", "-c", "while :; do :; done"], what="the probe", time_s=0.5, memory_bytes=GIB)
    # The wall-clock limit usually comes first; the CPU limit is what holds on a machine too busy for it.
    assert str(caught.value) in ("the probe ran past its 0.5 s time limit and was stopped",
                                 "the probe was ended by SIGXCPU: its 0.5 s CPU limit")


def _crash() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def _raise() -> None:
    raise ValueError("bad input")


def _hang() -> None:
    time.sleep(30)


def _double(x: int) -> int:
    return 2 * x


def test_a_function_in_a_child_returns_or_says_what_went_wrong() -> None:
    assert call_bounded(_double, 21, what="the probe") == 42
    with pytest.raises(LimitExceeded) as crashed:
        call_bounded(_crash, what="the probe")
    assert str(crashed.value) == "the probe crashed (exit code -11)"
    with pytest.raises(LimitExceeded) as raised:
        call_bounded(_raise, what="the probe")
    assert str(raised.value) == "the probe failed: ValueError: bad input"
    with pytest.raises(LimitExceeded) as slow:
        call_bounded(_hang, what="the probe", timeout_s=0.3)
    assert str(slow.value) == "the probe took longer than its limit of 0.3 s"


def test_no_child_is_started_with_preexec_fn() -> None:
    """Python code between fork and exec is unsafe while other threads run: limits go through the wrapper."""
    package = Path(unscaffold.__file__).parent
    offenders = [str(p.relative_to(package)) for p in package.rglob("*.py") if "preexec_fn" in p.read_text()]
    assert offenders == []
