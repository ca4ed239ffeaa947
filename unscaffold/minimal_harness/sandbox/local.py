"""`local`: bubblewrap isolation (read-only root, writable workspace, private /tmp, no network, own pids)."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import unscaffold
from unscaffold.errors import SandboxUnavailable
from unscaffold.minimal_harness.sandbox import shell_server
from unscaffold.minimal_harness.sandbox.base import ExecResult, SandboxConfig
from unscaffold.minimal_harness.sandbox.stream import TIMEOUT_EXIT_CODE, timeout_note

INSTALL_HINT = (
    "bubblewrap (bwrap) is not installed: install it with `apt-get install -y bubblewrap` "
    "(or your distribution's package), or pass `--sandbox none` to run without isolation"
)
_PACKAGE_ROOT = str(Path(unscaffold.__file__).resolve().parent.parent)
_GRACE_S = 10.0  # beyond the command's own timeout, for the server to answer
# Top-level folders a command may need (the system's programs and libraries, users' toolchains); the rest
# of the host (other projects, mounted disks) stays out, and every bind costs start-up time.
_RUNTIME = ("bin", "etc", "home", "lib", "lib32", "lib64", "libx32", "opt", "root", "sbin", "usr")


def sandbox_env(config: SandboxConfig) -> dict[str, str]:
    """A small, fixed environment: the project's Python first on PATH so the suites' libraries import."""
    venv_bin = str(Path(sys.executable).parent)
    env = {
        "PATH": f"{venv_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "TMPDIR": "/tmp",
    }
    env.update(config.env)
    return env


def parse_answer(header: bytes, read: Callable[[int], bytes]) -> ExecResult:
    """`EXIT TIMED_OUT ELIDED DURATION NBYTES` then the output (see shell_server)."""
    code, timed_out, elided, duration, size = header.split()
    output = read(int(size)).decode("utf-8", errors="replace")
    return ExecResult(output=output, exit_code=int(code), timed_out=timed_out == b"1", elided_chars=int(elided),
                      duration_s=float(duration))


def _project_paths() -> list[str]:
    """The project's package and Python (e.g. a checkout under /work or /tmp), unless a runtime folder
    already shows them: `python3` inside must be this environment."""
    candidates = {_PACKAGE_ROOT, sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent.parent)}
    shown = tuple(f"/{entry}/" for entry in _RUNTIME)
    needed = sorted(p for p in candidates if Path(p).is_dir() and p != "/" and not (p + "/").startswith(shown))
    return [p for p in needed if not any(p != q and p.startswith(q + "/") for q in needed)]


def bwrap_argv(config: SandboxConfig, inner: list[str], bwrap: str = "bwrap") -> list[str]:
    """The bubblewrap command line that runs `inner`. The root is a fresh tmpfs with the host's runtime
    folders bound read-only, so the workspace can appear at any path (e.g. Harbor's /app)."""
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not config.network:
        argv.append("--unshare-net")
    for entry in _RUNTIME:
        path = f"/{entry}"
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run", "--tmpfs", "/var"]
    argv += ["--ro-bind-try", "/var/lib", "/var/lib"]
    for path in _project_paths():
        argv += ["--ro-bind", path, path]
    argv += ["--bind", str(Path(config.workspace).resolve()), config.cwd]
    for m in config.mounts:
        argv += ["--bind" if m.writable else "--ro-bind", str(Path(m.source).resolve()), m.target]
    argv += ["--chdir", config.cwd, "--clearenv"]
    for key, value in sandbox_env(config).items():
        argv += ["--setenv", key, value]
    argv += ["--", *inner]
    return argv


class LocalSandbox:
    """One bubblewrap sandbox per trial, serving a fresh `bash -c` per command (see shell_server)."""

    def __init__(self, config: SandboxConfig) -> None:
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxUnavailable(INSTALL_HINT)
        self.config, self.bwrap = config, bwrap
        Path(config.workspace).mkdir(parents=True, exist_ok=True)
        net = "network on" if config.network else "no network"
        self.isolation = f"bubblewrap: read-only root, writable workspace, private /tmp, own pids, {net}"
        self._buffer = bytearray()
        self._lock = threading.Lock()
        # Start now: the server boots while the model thinks about its first step.
        self._proc: subprocess.Popen[bytes] | None = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        server = [sys.executable, "-I", "-S", str(Path(shell_server.__file__)), _PACKAGE_ROOT, self.config.cwd]
        argv = bwrap_argv(self.config, server, self.bwrap)
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=self.config.limits.preexec(),
        )
        self._buffer.clear()
        return proc

    def execute(self, command: str, timeout_s: float | None = None) -> ExecResult:
        timeout = timeout_s or self.config.timeout_s
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = self._start()
            proc = self._proc
            t0 = time.monotonic()
            deadline = t0 + timeout + _GRACE_S
            data = command.encode("utf-8", errors="replace")
            try:
                assert proc.stdin is not None
                proc.stdin.write(f"{timeout!r} {len(data)}\n".encode() + data)
                proc.stdin.flush()
                header = self._read_until(proc, b"\n", deadline)
                answer = parse_answer(header, lambda n: self._read_exact(proc, n, deadline))
            except (BrokenPipeError, OSError, ValueError):
                answer = None
            if answer is None:  # the server died, hung or garbled: start over next time, say what happened
                died = proc.poll() is not None
                self._stop()
                if died:
                    return ExecResult(output="[the sandbox shell died during the command]", exit_code=137,
                                      duration_s=time.monotonic() - t0)
                return ExecResult(output=timeout_note(timeout), exit_code=TIMEOUT_EXIT_CODE, timed_out=True,
                                  duration_s=time.monotonic() - t0)
            return answer

    def _fill(self, proc: subprocess.Popen[bytes], deadline: float) -> None:
        """Read what the server has sent so far into the buffer; EOF or the deadline raise ValueError."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ValueError("no answer before the deadline")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise ValueError("the server closed its output")
                self._buffer += chunk
                return

    def _read_until(self, proc: subprocess.Popen[bytes], separator: bytes, deadline: float) -> bytes:
        while separator not in self._buffer:
            self._fill(proc, deadline)
        line, _, rest = bytes(self._buffer).partition(separator)
        self._buffer[:] = rest
        return line

    def _read_exact(self, proc: subprocess.Popen[bytes], size: int, deadline: float) -> bytes:
        while len(self._buffer) < size:
            self._fill(proc, deadline)
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream:
                try:
                    stream.close()
                except OSError:
                    pass

    def close(self) -> None:
        """Ends the trial's sandbox; its pid namespace, and everything in it, goes with it."""
        with self._lock:
            self._stop()

    def __del__(self) -> None:
        if getattr(self, "_proc", None) is not None:
            self._stop()
