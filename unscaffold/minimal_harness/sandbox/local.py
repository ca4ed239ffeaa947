"""`local`: bubblewrap isolation (read-only root, writable workspace, private /tmp, no network, own pids),
commands as an unprivileged user with no capabilities, and no way to import the project itself."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import py_compile
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import unscaffold
from unscaffold.bounded import spawn
from unscaffold.errors import SandboxUnavailable
from unscaffold.minimal_harness.sandbox import shell_server
from unscaffold.minimal_harness.sandbox.base import ExecResult, SandboxConfig
from unscaffold.minimal_harness.sandbox.cgroup import SandboxCgroup
from unscaffold.minimal_harness.sandbox.identity import (
    CGROUP_PREFIX,
    allocate_uid,
    hand_back,
    hand_over,
    identity_pipes,
    release_uid,
)
from unscaffold.minimal_harness.sandbox.owner import pid_alive
from unscaffold.minimal_harness.sandbox.shell_server import READY, inner_argv
from unscaffold.minimal_harness.sandbox.stream import TIMEOUT_EXIT_CODE, timeout_note

INSTALL_HINT = (
    "bubblewrap (bwrap) is not installed: install it with `apt-get install -y bubblewrap` "
    "(or your distribution's package), or pass `--sandbox none` to run without isolation"
)
_PACKAGE_DIR = Path(unscaffold.__file__).resolve().parent
_GRACE_S = 10.0  # beyond the command's own timeout, for the server to answer
# Top-level folders a command may need (the system's programs and libraries); the rest of the host
# (home folders, other projects, mounted disks, the project's runs) stays out.
_RUNTIME = ("bin", "etc", "lib", "lib32", "lib64", "libx32", "opt", "sbin", "usr")
SERVER_ROOT = "/run/shell-server"  # inside: the server's own modules, nothing else of the project
# The modules the shell server imports (standard library only beyond these).
_SERVER_MODULES = ("shell_server.py", "stream.py", "output.py", "result.py")
# The server run from its compiled form: a script given as source is compiled at every start (a quarter
# of the server's own CPU), and its modules imported from source would be too (the copy is read-only).
SERVER_SCRIPT = f"{SERVER_ROOT}/unscaffold/minimal_harness/sandbox/shell_server.pyc"
_SERVER_PROCESSES = 4  # bubblewrap, its init, the inner bubblewrap and the server: beyond the student's own


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


_UNDER_RUNTIME = tuple(f"/{entry}/" for entry in _RUNTIME)


@functools.cache
def _python_paths() -> tuple[str, ...]:
    """The project's Python (its environment and the interpreter it was made from), unless a runtime
    folder already shows them: `python3` inside must be this environment, for the suites' libraries.
    The same for the whole process, so found once (every trial's sandbox asks)."""
    candidates = {sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent.parent)}
    needed = sorted(p for p in candidates if Path(p).is_dir() and p != "/" and not (p + "/").startswith(_UNDER_RUNTIME))
    return tuple(p for p in needed if not any(p != q and p.startswith(q + "/") for q in needed))


@functools.cache
def _hidden_paths(bound: tuple[str, ...]) -> tuple[str, ...]:
    """The project package where a bound folder would show it (an installed, not editable, copy):
    covered by an empty folder, so no command can import it or read its data (gold answers among it)."""
    package = str(_PACKAGE_DIR)
    roots = [f"/{entry}" for entry in _RUNTIME] + list(bound)
    return (package,) if any(package.startswith(r + "/") for r in roots) else ()


@functools.cache
def _runtime_binds() -> tuple[str, ...]:
    """The host's runtime folders, read-only (links as links): the same for every sandbox of the process."""
    argv: list[str] = []
    for entry in _RUNTIME:
        path = f"/{entry}"
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    return tuple(argv)


def _parent_dirs(target: str, made: set[str]) -> list[str]:
    """Folders above a mount point, made traversable (bubblewrap would make them private to root, and
    the sandbox user could not reach what is mounted below). Plain string work: every sandbox start
    calls this for each of its mounts."""
    out: list[str] = []
    folder = ""
    for part in [p for p in target.split("/") if p not in ("", ".")][:-1]:  # as Path(target).parts has them
        folder += "/" + part
        if folder in made or folder.startswith(_UNDER_RUNTIME):
            continue
        made.add(folder)
        out += ["--perms", "0755", "--dir", folder]
    made.add(target)
    return out


_userns_flag: dict[str, bool] = {}


@functools.cache
def _setpriv() -> str | None:
    """Looked up once per process rather than at every sandbox start (a walk along PATH)."""
    return shutil.which("setpriv")


def disable_userns_supported(bwrap: str) -> bool:
    """Whether this bubblewrap has `--disable-userns` (0.8 and later): asked once per binary."""
    if bwrap not in _userns_flag:
        try:
            text = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            text = ""
        _userns_flag[bwrap] = "--disable-userns" in text
    return _userns_flag[bwrap]


_server_dir: str | None = None
_server_lock = threading.Lock()
SERVER_COPY_PREFIX = "unscaffold-shell-"  # then the pid of the process that made the copy, a dash, a random tail


def remove_stale_server_copies(folder: Path | None = None) -> list[Path]:
    """Remove the copies of this user whose process is gone: one killed (SIGKILL, `os._exit`) or a forked
    child never runs its exit handlers, so its copy would stay in the temporary folder for good."""
    removed = []
    for path in Path(folder or tempfile.gettempdir()).glob(f"{SERVER_COPY_PREFIX}*-*"):
        pid = path.name[len(SERVER_COPY_PREFIX):].partition("-")[0]
        try:
            mine = not path.is_symlink() and path.is_dir() and path.stat().st_uid == os.getuid()
        except OSError:
            continue
        if mine and pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _remove_own_copy(root: Path, owner: int) -> None:
    if os.getpid() == owner:  # a forked child runs its parent's exit handlers too: the copy is not its own
        shutil.rmtree(root, ignore_errors=True)


def server_dir() -> str:
    """A private copy of the shell server's modules (laid out as their package), made once per process:
    the sandbox binds this, never the project, so nothing else of the project is within reach."""
    global _server_dir
    with _server_lock:
        if _server_dir is None:
            remove_stale_server_copies()
            root = Path(tempfile.mkdtemp(prefix=f"{SERVER_COPY_PREFIX}{os.getpid()}-"))
            package = root / "unscaffold" / "minimal_harness" / "sandbox"
            package.mkdir(parents=True)
            for folder in (root / "unscaffold", root / "unscaffold" / "minimal_harness", package):
                (folder / "__init__.py").write_text("")
            source = Path(shell_server.__file__).parent
            for name in _SERVER_MODULES:
                shutil.copyfile(source / name, package / name)
            for module in [*root.rglob("*.py")]:  # the imports' caches, trusted as made (no source check)
                py_compile.compile(str(module), doraise=True, optimize=0,  # the server runs without -O
                                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
            py_compile.compile(str(package / "shell_server.py"), cfile=str(package / "shell_server.pyc"),
                               doraise=True, optimize=0,
                               invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
            for path in [root, *root.rglob("*")]:
                path.chmod(0o755 if path.is_dir() else 0o644)
            atexit.register(_remove_own_copy, root, os.getpid())
            _server_dir = str(root)
        return _server_dir


def bwrap_argv(config: SandboxConfig, inner: list[str], bwrap: str = "bwrap", uid: int | None = None,
               files: dict[str, int] | None = None) -> list[str]:
    """The bubblewrap command line that runs `inner`. The root is a fresh tmpfs with the host's runtime
    folders bound read-only, so the workspace can appear at any path (e.g. Harbor's /app).

    As root (`uid` given) bubblewrap keeps only the two capabilities the server needs to become `uid`,
    which it does before it serves anything; otherwise a user namespace with no capabilities. `files`: read-only
    files shown over the runtime's (path inside -> a file descriptor holding the content)."""
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if uid is None:  # the server makes a user and pid namespace per command, and no command may make more
        argv += ["--unshare-user", "--cap-drop", "ALL"]
    else:
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    if not config.network:
        argv.append("--unshare-net")
    argv += _runtime_binds()
    for target, fd in (files or {}).items():
        argv += ["--perms", "0644", "--ro-bind-data", str(fd), target]
    limits = config.limits
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",
             "--size", str(limits.var_bytes), "--tmpfs", "/run", "--size", str(limits.var_bytes), "--tmpfs", "/var",
             "--perms", "1777", "--dir", "/var/tmp"]
    argv += ["--ro-bind-try", "/var/lib", "/var/lib"]
    made = {"/proc", "/dev", "/tmp", "/run", "/var", *(f"/{entry}" for entry in _RUNTIME)}

    def bind(option: str, source: str, target: str) -> None:
        argv.extend(_parent_dirs(target, made) + [option, source, target])

    python = _python_paths()
    for path in python:
        bind("--ro-bind", path, path)
    for path in _hidden_paths(python):
        argv += ["--tmpfs", path]
    bind("--ro-bind", server_dir(), SERVER_ROOT)
    bind("--bind", str(Path(config.workspace).resolve()), config.cwd)
    for m in config.mounts:
        bind("--bind" if m.writable else "--ro-bind", str(Path(m.source).resolve()), m.target)
    # As root, the server changes into the workspace itself once it is the sandbox user: without
    # capabilities root may not enter a folder that user owns.
    argv += (["--chdir", config.cwd] if uid is None else []) + ["--clearenv"]
    for key, value in sandbox_env(config).items():
        argv += ["--setenv", key, value]
    argv += ["--", *inner]
    return argv


class LocalSandbox:
    """One bubblewrap sandbox per trial, serving a fresh `bash -c` per command (see shell_server).

    As root, every process of the sandbox lives in one cgroup of its own: after each command all but the
    server's own processes are ended there (frozen first, so none forks away), before the host touches
    the writable folders and before the next command, the verifier included."""

    def __init__(self, config: SandboxConfig) -> None:
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxUnavailable(INSTALL_HINT)
        self.config, self.bwrap = config, bwrap
        Path(config.workspace).mkdir(parents=True, exist_ok=True)
        self._buffer = bytearray()
        self._lock = threading.Lock()
        self._closed = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._keep: set[int] | None = None  # the server's own processes, once it said READY
        self.cgroup: SandboxCgroup | None = None
        self.uid = allocate_uid()
        try:
            if self.uid is not None:
                limits = config.limits
                self.cgroup = SandboxCgroup.create(f"{CGROUP_PREFIX}{self.uid}", limits.processes + _SERVER_PROCESSES,
                                                   limits.sandbox_memory_bytes)
            self.hand_over_writable()
            self.isolation = self._describe()
            # Start now: the server boots while the model thinks about its first step.
            self._proc = self._start()
        except BaseException:
            self.close()
            raise

    def _describe(self) -> str:
        net = "network on" if self.config.network else "no network"
        user = f"uid {self.uid}" if self.uid is not None else "the host user in a user namespace"
        per_command = self.uid is None and disable_userns_supported(self.bwrap)
        userns = "no new user namespaces" if self.uid is not None or per_command else (
            "user namespaces not blocked (bubblewrap too old for --disable-userns)")
        if self.cgroup is not None:
            bounds = " and ".join(f"{c} limit" for c in self.cgroup.limits) or "no limits"
            processes = f"a cgroup per sandbox ends every process a command left ({bounds})"
        elif per_command:
            processes = "a pid namespace per command ends every process it started (no cgroup without root)"
        else:
            processes = "leftover processes killed in passes inside the pid namespace (no cgroup without root)"
        return (f"bubblewrap: read-only root, writable workspace, private /tmp, own pids, {net}; {userns}; "
                f"commands as {user} with no capabilities; {processes}")

    def hand_over_writable(self) -> None:
        """The workspace and writable mounts belong to the sandbox user (call again after the host adds
        files there, e.g. a verifier's tests). No process of the student runs meanwhile."""
        if self.uid is None:
            return
        with self._lock:
            self._end_leftovers()
            hand_over(self.config, self.uid)

    def _start(self) -> subprocess.Popen[bytes]:
        if self._closed:
            raise SandboxUnavailable("the sandbox was closed")
        # A server starts in an empty group: what an earlier server left would otherwise count as the new
        # server's own processes (kept, never swept) and run on beside it.
        if self.cgroup is not None and not self.cgroup.kill_all():
            raise SandboxUnavailable("processes an earlier command left in the sandbox would not end")
        script = SERVER_SCRIPT
        server = [sys.executable, "-I", "-S", script, SERVER_ROOT, self.config.cwd]
        setpriv = _setpriv()
        if self.uid is not None and setpriv is not None:  # become the uid, then the server's own bubblewrap
            uid = str(self.uid)
            server = [setpriv, "--reuid", uid, "--regid", uid, "--clear-groups", "--inh-caps=-all", "--",
                      *inner_argv(self.bwrap, sys.executable, script, SERVER_ROOT, self.config.cwd)]
        elif self.uid is not None:  # the server does the same itself (one Python start more)
            server += [str(self.uid), self.bwrap]
        else:  # with --disable-userns at hand, the server gives every command a pid namespace of its own
            server += ["-1"] + ([self.bwrap] if disable_userns_supported(self.bwrap) else [])
        files = identity_pipes(self.uid) if self.uid is not None else {}
        argv = bwrap_argv(self.config, server, self.bwrap, uid=self.uid, files=files)
        # The wrapper joins the group before bubblewrap starts: all it starts is in the group from the first
        # instant; and the rlimits hold for every process of the sandbox.
        try:
            proc = spawn(argv, rlimits=self.config.limits.rlimits(),
                         cgroup_procs=self.cgroup.procs_files() if self.cgroup is not None else (),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         pass_fds=tuple(files.values()))
        finally:
            for fd in files.values():
                os.close(fd)
        self._buffer.clear()
        self._keep = None
        return proc

    def _await_ready(self, proc: subprocess.Popen[bytes], deadline: float) -> None:
        """Read the server's READY line; then the group holds only the server's own processes (no
        command has run yet), which are the ones kept from then on."""
        if self._keep is not None:
            return
        if self._read_until(proc, b"\n", deadline) != READY.strip():
            raise ValueError("the server did not start")
        self._keep = self.cgroup.procs() if self.cgroup is not None else set()

    def _end_leftovers(self) -> None:
        """End every process the commands left behind; if any will not go, end the whole sandbox."""
        if self.cgroup is None or self._proc is None or self._keep is None:
            return
        if not self.cgroup.kill_except(self._keep):
            self._stop()

    def execute(self, command: str, timeout_s: float | None = None) -> ExecResult:
        timeout = timeout_s or self.config.timeout_s
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._stop()
                self._proc = self._start()
            proc = self._proc
            t0 = time.monotonic()
            deadline = t0 + timeout + _GRACE_S
            data = command.encode("utf-8", errors="replace")
            try:
                self._await_ready(proc, deadline)
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
            self._end_leftovers()
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

    def _stop(self) -> bool:
        """End the sandbox's every process; False if some would not end (their group is kept)."""
        proc, self._proc = self._proc, None
        self._keep = None
        ended = self.cgroup.kill_all() if self.cgroup is not None else True
        if proc is None:
            return ended
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
        return ended

    def close(self) -> None:
        """Ends the trial's sandbox and every process in it. The uid is given out again only once nothing
        of it is left: its processes ended, its files handed back to the host's user."""
        with self._lock:
            ended = self._stop()
            self._closed = True
            if ended:
                hand_back(self.config, self.uid)
            if self.uid is None:
                return
            if ended:
                if self.cgroup is not None:
                    self.cgroup.remove()
                release_uid(self.uid)
            self.uid = None

    def __del__(self) -> None:
        """A sandbox dropped without `close` still ends its processes, removes its cgroup and gives back
        its uid."""
        if getattr(self, "_lock", None) is not None and not self._closed:
            with contextlib.suppress(Exception):
                self.close()
