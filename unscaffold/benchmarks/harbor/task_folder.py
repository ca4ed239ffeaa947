"""Reads one Harbor task folder into a validated description."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unscaffold.errors import InputError
from unscaffold.iojson import validation_error
from unscaffold.nofollow import RefusedPath, check_tree
from unscaffold.offline.dockerfile import final_workdir, instructions, read_task_text

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
    steps: list[dict[str, Any]] | None = Field(None, description="`[[steps]]`: a multi-step task")


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
    def dockerfile(self) -> Path | None:
        path = self.root / "environment" / "Dockerfile"
        return path if path.is_file() else None

    @property
    def seed_dir(self) -> Path | None:
        """Files the local sandbox copies into the workspace (a Dockerfile cannot be built there)."""
        path = self.root / "environment" / "workspace"
        return path if path.is_dir() else None


def dockerfile_workdir(dockerfile: Path) -> str | None:
    if not dockerfile.is_file():
        return None
    try:
        return final_workdir(instructions(read_task_text(dockerfile)))
    except RefusedPath as e:
        raise refusal(e) from None


def refuse_links(root: Path) -> None:
    """A task folder is untrusted input read as root: a link in it (to a root-only file, to `/`, to a host
    folder a COPY would write into) or a special file is refused before anything is read from it."""
    try:
        check_tree(root)
    except RefusedPath as e:
        raise refusal(e) from None


def refusal(e: RefusedPath) -> InputError:
    """A path of a task folder that was not read, as one line naming it."""
    return InputError(str(e.path), None, "a symbolic link: a task folder may hold no links" if e.link else e.problem)


def read_task(root: Path) -> HarborTask:
    root = Path(root)
    refuse_links(root)
    toml_path = root / "task.toml"
    try:
        raw = tomllib.loads(read_task_text(toml_path))
    except RefusedPath as e:
        if not e.refused and e.problem == "not found":
            raise InputError(str(toml_path), None, "file not found (a Harbor task folder needs task.toml)") from None
        raise refusal(e) from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(str(toml_path), None, f"invalid TOML: {e}") from None
    try:
        config = TaskToml.model_validate(raw)
    except ValidationError as e:
        raise validation_error(str(toml_path), e) from None
    if config.steps:
        raise InputError(str(toml_path), "steps", f"a multi-step task ({len(config.steps)} [[steps]]) is not "
                         "supported: unscaffold runs one instruction per trial")
    instruction_path = root / "instruction.md"
    if not instruction_path.is_file():
        raise InputError(str(instruction_path), None, "file not found")
    try:
        instruction = read_task_text(instruction_path).strip()
    except RefusedPath as e:
        raise refusal(e) from None
    if not instruction:
        raise InputError(str(instruction_path), None, "the instruction is empty")
    if not (root / "tests" / "test.sh").is_file():
        raise InputError(str(root / "tests" / "test.sh"), None, "file not found (the verifier entry point)")
    workdir = (
        config.environment.workdir or dockerfile_workdir(root / "environment" / "Dockerfile") or DEFAULT_WORKDIR
    )
    return HarborTask(id=root.name, root=root, instruction=instruction, config=config, workdir=workdir)


def find_tasks(data: Path) -> tuple[list[HarborTask], dict[str, str]]:
    """A task folder itself, or a folder whose sub-folders are tasks. A broken sub-folder does not stop
    the others: it comes back in the second value, folder name -> why it is skipped."""
    data = Path(data)
    if not data.is_dir():
        raise InputError(str(data), None, "not a folder of Harbor tasks")
    if (data / "task.toml").is_file():
        return [read_task(data)], {}
    tasks, skipped = [], {}
    for path in sorted(data.iterdir()):
        if not (path.is_dir() and (path / "task.toml").is_file()):
            continue
        try:
            tasks.append(read_task(path))
        except InputError as e:
            skipped[path.name] = str(e)
    if not tasks:
        why = f": {'; '.join(f'{k}: {v}' for k, v in skipped.items())}" if skipped else ""
        raise InputError(str(data), None, f"no usable Harbor task folders (with task.toml) found{why}")
    return tasks, skipped
