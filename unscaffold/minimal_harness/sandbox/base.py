"""The sandbox protocol and its configuration; backends differ only in how they isolate."""

from __future__ import annotations

import resource
from collections.abc import Callable
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from unscaffold.minimal_harness.sandbox.result import ExecResult

__all__ = ["ExecResult", "Limits", "Mount", "Sandbox", "SandboxConfig", "SandboxKind"]

SandboxKind = Literal["local", "docker", "none"]


class Mount(BaseModel):
    """A host folder shown inside the sandbox at `target`."""

    source: Path
    target: str
    writable: bool = False


class Limits(BaseModel):
    memory_bytes: int = 8 * 1024**3
    processes: int = 1024
    file_size_bytes: int = 2 * 1024**3

    def preexec(self) -> Callable[[], None]:
        """A function for Popen's preexec_fn that applies these limits in the child."""
        memory, processes, file_size = self.memory_bytes, self.processes, self.file_size_bytes

        def apply() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))

        return apply


class SandboxConfig(BaseModel):
    kind: SandboxKind = "local"
    workspace: Path
    workdir: str | None = Field(None, description="Where the workspace appears inside; default its own path.")
    mounts: list[Mount] = Field(default_factory=list)
    network: bool = False
    timeout_s: float = 60.0
    limits: Limits = Field(default_factory=Limits)
    image: str = "python:3.11-slim"
    env: dict[str, str] = Field(default_factory=dict)

    @property
    def cwd(self) -> str:
        return self.workdir or str(self.workspace)


class Sandbox(Protocol):
    config: SandboxConfig
    isolation: str

    def execute(self, command: str, timeout_s: float | None = None) -> ExecResult: ...

    def close(self) -> None: ...
