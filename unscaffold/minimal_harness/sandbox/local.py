"""`local`: bubblewrap isolation (read-only root, writable workspace, private /tmp, no network, own pids)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from unscaffold.errors import SandboxUnavailable
from unscaffold.minimal_harness.sandbox.base import ExecResult, SandboxConfig
from unscaffold.minimal_harness.sandbox.process import run_argv

INSTALL_HINT = (
    "bubblewrap (bwrap) is not installed: install it with `apt-get install -y bubblewrap` "
    "(or your distribution's package), or pass `--sandbox none` to run without isolation"
)
# Top-level entries that get their own fresh mounts instead of the host's.
_PRIVATE = {"proc", "dev", "tmp", "sys", "run", "var", "lost+found"}


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


def bwrap_argv(config: SandboxConfig, command: str, bwrap: str = "bwrap") -> list[str]:
    """Build the bubblewrap command line. The root is a fresh tmpfs with the host's top-level
    folders bound read-only, so the workspace can appear at any path (e.g. Harbor's /app)."""
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not config.network:
        argv.append("--unshare-net")
    for entry in sorted(os.listdir("/")):
        if entry in _PRIVATE:
            continue
        path = f"/{entry}"
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run", "--tmpfs", "/var"]
    argv += ["--ro-bind-try", "/var/lib", "/var/lib", "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf"]
    argv += ["--bind", str(Path(config.workspace).resolve()), config.cwd]
    for m in config.mounts:
        argv += ["--bind" if m.writable else "--ro-bind", str(Path(m.source).resolve()), m.target]
    argv += ["--chdir", config.cwd, "--clearenv"]
    for key, value in sandbox_env(config).items():
        argv += ["--setenv", key, value]
    argv += ["--", "bash", "-c", command]
    return argv


class LocalSandbox:
    isolation = "bubblewrap: read-only root, private /tmp, own pid namespace"

    def __init__(self, config: SandboxConfig) -> None:
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxUnavailable(INSTALL_HINT)
        self.config, self.bwrap = config, bwrap
        Path(config.workspace).mkdir(parents=True, exist_ok=True)
        net = "network on" if config.network else "no network"
        self.isolation = f"bubblewrap: read-only root, writable workspace, private /tmp, own pids, {net}"

    def execute(self, command: str, timeout_s: float | None = None) -> ExecResult:
        argv = bwrap_argv(self.config, command, self.bwrap)
        return run_argv(argv, timeout_s=timeout_s or self.config.timeout_s, limits=self.config.limits)

    def close(self) -> None:
        """Nothing outlives a command: each call's pid namespace dies with it."""
