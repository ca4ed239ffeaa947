"""The sandbox protocol and its configuration; backends differ only in how they isolate."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, Field

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


class ExecResult(BaseModel):
    output: str
    exit_code: int
    timed_out: bool = False
    elided_chars: int = 0
    duration_s: float = 0.0

    def observation(self) -> str:
        """The text the student sees: output, then the exit code."""
        return f"{self.output}\n[exit_code={self.exit_code}]"


class Sandbox(Protocol):
    config: SandboxConfig
    isolation: str

    def execute(self, command: str, timeout_s: float | None = None) -> ExecResult: ...

    def close(self) -> None: ...
