"""`none`: no isolation at all. Only on explicit request; says so loudly."""

from __future__ import annotations

import os
from pathlib import Path

from unscaffold.minimal_harness.sandbox.base import ExecResult, SandboxConfig
from unscaffold.minimal_harness.sandbox.local import sandbox_env
from unscaffold.minimal_harness.sandbox.process import run_argv


class UnisolatedSandbox:
    isolation = "none: commands run directly on the host (no isolation)"

    def __init__(self, config: SandboxConfig) -> None:
        if config.workdir and config.workdir != str(config.workspace):
            # Without mount namespaces the workspace cannot appear elsewhere; run in place.
            config = config.model_copy(update={"workdir": None})
        self.config = config
        Path(config.workspace).mkdir(parents=True, exist_ok=True)

    def execute(self, command: str, timeout_s: float | None = None) -> ExecResult:
        env = {**os.environ, **sandbox_env(self.config)}
        env["HOME"] = os.environ.get("HOME", "/tmp")
        return run_argv(
            ["bash", "-c", command],
            timeout_s=timeout_s or self.config.timeout_s,
            cwd=str(self.config.workspace),
            env=env,
            rlimits=self.config.limits.rlimits(),
        )

    def hand_over_writable(self) -> None:
        """Commands run as the host user: nothing to hand over."""

    def close(self) -> None:
        pass
