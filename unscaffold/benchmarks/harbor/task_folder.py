"""Reads one Harbor task folder into a validated description."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unscaffold.errors import InputError
from unscaffold.iojson import validation_error

DEFAULT_WORKDIR = "/app"


class VerifierSection(BaseModel):
    model_config = ConfigDict(extra="allow")
    timeout_sec: float = Field(600.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)


class AgentSection(BaseModel):
    model_config = ConfigDict(extra="allow")
    timeout_sec: float | None = Field(None, gt=0)


class EnvironmentSection(BaseModel):
    model_config = ConfigDict(extra="allow")
    docker_image: str | None = None
    allow_internet: bool = False
    workdir: str | None = None


class TaskToml(BaseModel):
    model_config = ConfigDict(extra="allow")
    version: str = "1.0"
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierSection = Field(default_factory=VerifierSection)
    agent: AgentSection = Field(default_factory=AgentSection)
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)


class HarborTask(BaseModel):
    id: str
    root: Path
    instruction: str
    config: TaskToml
    workdir: str

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"

    @property
    def solution(self) -> Path | None:
        path = self.root / "solution" / "solve.sh"
        return path if path.is_file() else None

    @property
    def seed_dir(self) -> Path | None:
        """Files the local sandbox copies into the workspace (a Dockerfile cannot be built there)."""
        path = self.root / "environment" / "workspace"
        return path if path.is_dir() else None


def dockerfile_workdir(dockerfile: Path) -> str | None:
    if not dockerfile.is_file():
        return None
    found = None
    for line in dockerfile.read_text(encoding="utf-8", errors="replace").splitlines():
        m = re.match(r"\s*WORKDIR\s+(\S+)", line, re.IGNORECASE)
        if m:
            found = m.group(1)
    return found if found and found.startswith("/") else None


def read_task(root: Path) -> HarborTask:
    root = Path(root)
    toml_path = root / "task.toml"
    try:
        raw = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(str(toml_path), None, "file not found (a Harbor task folder needs task.toml)") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(str(toml_path), None, f"invalid TOML: {e}") from None
    try:
        config = TaskToml.model_validate(raw)
    except ValidationError as e:
        raise validation_error(str(toml_path), e) from None
    instruction_path = root / "instruction.md"
    if not instruction_path.is_file():
        raise InputError(str(instruction_path), None, "file not found")
    instruction = instruction_path.read_text(encoding="utf-8").strip()
    if not instruction:
        raise InputError(str(instruction_path), None, "the instruction is empty")
    if not (root / "tests" / "test.sh").is_file():
        raise InputError(str(root / "tests" / "test.sh"), None, "file not found (the verifier entry point)")
    workdir = (
        config.environment.workdir or dockerfile_workdir(root / "environment" / "Dockerfile") or DEFAULT_WORKDIR
    )
    return HarborTask(id=root.name, root=root, instruction=instruction, config=config, workdir=workdir)


def find_tasks(data: Path) -> list[HarborTask]:
    """A task folder itself, or a folder whose sub-folders are tasks."""
    data = Path(data)
    if not data.is_dir():
        raise InputError(str(data), None, "not a folder of Harbor tasks")
    if (data / "task.toml").is_file():
        return [read_task(data)]
    tasks = [read_task(p) for p in sorted(data.iterdir()) if p.is_dir() and (p / "task.toml").is_file()]
    if not tasks:
        raise InputError(str(data), None, "no Harbor task folders (with task.toml) found")
    return tasks
