"""The sandbox protocol and its configuration; backends differ only in how they isolate."""

from __future__ import annotations

import resource
import typing
from pathlib import Path
from typing import Annotated, Literal, Protocol

from pydantic import BaseModel, Field, field_validator

from unscaffold.bounded import capped
from unscaffold.flags import flag
from unscaffold.minimal_harness.sandbox.result import ExecResult
from unscaffold.specs.base import read_as
from unscaffold.specs.image import BaseImageSpec

__all__ = ["ExecResult", "Limits", "Mount", "Sandbox", "SandboxConfig", "SandboxKind", "SandboxSettings"]

SandboxKind = Literal["local", "docker", "none"]


def sandbox_kind(value: str) -> SandboxKind:
    """A `--sandbox` value as the typed kind, or one line saying which kinds exist."""
    from unscaffold.errors import UnscaffoldError, did_you_mean

    kinds = typing.get_args(SandboxKind)
    if value not in kinds:
        raise UnscaffoldError(f"--sandbox: unknown kind {value!r}; use {', '.join(kinds[:-1])} or {kinds[-1]}"
                              f"{did_you_mean(value, kinds)}")
    return typing.cast(SandboxKind, value)
DEFAULT_COMMAND_TIMEOUT_S = 600.0  # the reference harness's
# The `--sandbox` and `--command-timeout` settings, as every command that runs trials declares them.
SandboxChoice = Annotated[SandboxKind, Field(description="local (bubblewrap), docker, or none (no isolation).",
                                             json_schema_extra=flag("--sandbox"))]
CommandTimeout = Annotated[float, Field(gt=0, description="Seconds per command.",
                                        json_schema_extra=flag("--command-timeout"))]
DOCKER_ADVICE = "run it with `--sandbox docker` to build the task's image"  # what `local` cannot set up
# The image the docker sandbox builds for the built-in suites when neither an image nor a build folder
# is given: a Python with the suites' libraries (each suite lists its own in `benchmarks/<suite>/image/`),
# as `python3` is under `local`. One image serves every built-in suite.
SUITES_IMAGE_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "image" / "registry"


class Mount(BaseModel):
    """A host folder shown inside the sandbox at `target`."""

    source: Path
    target: str
    writable: bool = False


class Limits(BaseModel):
    """Per-trial resource limits. Each is lowered to what the host process itself may grant, so a host
    running under a lower hard limit still starts sandboxes (with the lower value)."""

    memory_bytes: int = Field(8 * 1024**3, description="address space of each process (RLIMIT_AS)")
    processes: int = Field(1024, description="processes and threads of the sandbox user (RLIMIT_NPROC, and the "
                           "sandbox's cgroup as root)")
    sandbox_memory_bytes: int = Field(8 * 1024**3, description="memory of all the sandbox's processes together "
                                      "(its cgroup, as root)")
    file_size_bytes: int = Field(2 * 1024**3, description="largest file a command may write (RLIMIT_FSIZE)")
    tmp_bytes: int = Field(1024**3, description="size of the private /tmp (RAM-backed)")
    var_bytes: int = Field(256 * 1024**2, description="size of the private /var and /run (RAM-backed)")
    workspace_bytes: int = Field(4 * 1024**3, description="the workspace, checked after every command (and, on a "
                                 "filesystem of its own, the size of that filesystem with the writable mounts)")
    workspace_entries: int = Field(200_000, description="files and folders in the workspace, same check")

    def rlimits(self) -> dict[int, tuple[int, int]]:
        """rlimit resource -> (soft, hard) for the exec wrapper that starts a sandbox's processes, each
        capped by the host's current hard limit."""
        wanted = {resource.RLIMIT_AS: self.memory_bytes, resource.RLIMIT_NPROC: self.processes,
                  resource.RLIMIT_FSIZE: self.file_size_bytes}
        return {res: capped(res, value) for res, value in wanted.items()}


class SandboxSettings(BaseModel):
    """What a run chooses about its sandboxes (each trial's SandboxConfig is made from these and the task)."""

    kind: SandboxChoice = "local"
    command_timeout_s: CommandTimeout = DEFAULT_COMMAND_TIMEOUT_S
    keep_workspace: bool = Field(False, description="Keep each trial's workspace and writable folders after it "
                                 "ends (by default, where the sandbox gives them a filesystem of their own, only "
                                 "the trial's record stays).", json_schema_extra={"flag": "--keep-workspace"})
    base_images: list[Annotated[BaseImageSpec, read_as(BaseImageSpec, "--base-image")]] = Field(
        default_factory=list, description="docker: IMAGE=LOCAL_IMAGE (comma-separated) builds a task Dockerfile's "
        "unpullable `FROM IMAGE` on a local image instead; the trial's isolation names the substitute.",
        json_schema_extra={"flag": "--base-image"})

    @field_validator("base_images", mode="before")
    @classmethod
    def _split_base_images(cls, value: object) -> object:
        return [pair for pair in value.split(",") if pair.strip()] if isinstance(value, str) else value

    def substitutes(self) -> dict[str, str]:
        """`--base-image` as a mapping from the image a Dockerfile names to the local one built on."""
        return {spec.image: spec.local for spec in self.base_images}


class SandboxConfig(BaseModel):
    kind: SandboxKind = "local"
    workspace: Path
    workdir: str | None = Field(None, description="Where the workspace appears inside; default its own path.")
    mounts: list[Mount] = Field(default_factory=list)
    network: bool = False
    timeout_s: float = Field(DEFAULT_COMMAND_TIMEOUT_S, gt=0, description="seconds per command")
    limits: Limits = Field(default_factory=Limits)
    image: str | None = Field(None, description="docker: run this image (pulled if missing)")
    build: Path | None = Field(None, description="docker: without `image`, build this folder's Dockerfile (cached "
                               "by its content hash); neither: the suites' image from SUITES_IMAGE_DIR")
    seed_from_image: bool = Field(False, description="docker: first copy the image's workdir into the workspace "
                                  "(a task image keeps the task's files there)")
    base_images: dict[str, str] = Field(default_factory=dict, description="docker: a Dockerfile's `FROM` image "
                                        "(or the task's image) -> the local image used instead")
    env: dict[str, str] = Field(default_factory=dict)

    @property
    def cwd(self) -> str:
        return self.workdir or str(self.workspace)


class Sandbox(Protocol):
    config: SandboxConfig
    isolation: str

    def execute(self, command: str, timeout_s: float | None = None) -> ExecResult: ...

    def hand_over_writable(self) -> None:
        """Give files the host added to the workspace or a writable mount to the sandbox's user."""

    def close(self) -> None: ...
