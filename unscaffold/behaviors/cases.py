"""Cases for a bank's behaviour detectors (`detector_cases.toml` beside its manifest).

A case with a `task` was run for real on that task of the suite (scripts/record_cases.py): its observations,
exit statuses and recorded evidence are kept in `detector_cases.recorded.jsonl`, so evidence decides it as it
would a real trial. The others are read from their text alone, with the exit statuses they state.

Each case is a short trajectory in a form a capable model writes under h (heredocs, one-liners, other
variable names, a script written to a file and then run, a check spread over two commands) or a near
miss (the library imported but never called on the answer, the check run before the last write), and
says whether the detector must fire. `actions` names shared commands so cases stay readable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from unscaffold.errors import InputError
from unscaffold.iojson import load_toml_model, validation_error
from unscaffold.llm.types import Message
from unscaffold.minimal_harness.evidence import CommandEvidence
from unscaffold.minimal_harness.trajectory import Trajectory

CASES_FILE = "detector_cases.toml"
RECORDINGS_FILE = "detector_cases.recorded.jsonl"  # the cases with a `task`, run for real with evidence recorded


class ToolAction(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Case(BaseModel):
    model_config = ConfigDict(extra="forbid")
    component: str
    shows: bool
    why: str = Field(min_length=1, description="the form or the near miss this case stands for")
    steps: list[str | ToolAction] = Field(description="commands (or names from `actions`) and h* tool calls")
    outputs: dict[int, str] = Field(default_factory=dict, description="step index -> its observation")
    exit_codes: dict[int, int] = Field(default_factory=dict, description="step index -> the exit status the command "
                                       "really has (0 when not given)")
    final: str | None = Field(None, description="the final answer; the episode ends submitted")
    task: str | None = Field(None, description="a task of the suite the case's commands were really run on: their "
                             "observations, exit statuses and recorded evidence come from the recordings file "
                             f"({RECORDINGS_FILE}, written by scripts/record_cases.py)")

    @property
    def key(self) -> str:
        return f"{self.component} | {self.why}"


class RecordedStep(BaseModel):
    model_config = ConfigDict(extra="forbid")
    command: str
    observation: str
    exit_code: int | None


class RecordedCase(BaseModel):
    """One case run for real: what each command printed and returned, and what it was recorded doing."""

    model_config = ConfigDict(extra="forbid")
    key: str
    task: str
    steps: list[RecordedStep]
    evidence: list[CommandEvidence]


class CaseFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    actions: dict[str, str] = Field(default_factory=dict)
    cases: list[Case]
    recordings: dict[str, RecordedCase] = Field(default_factory=dict, description="case key -> its real run")

    def commands(self, case: Case) -> list[str | ToolAction]:
        return [self.actions[s[1:]] if isinstance(s, str) and s.startswith("@") else s for s in case.steps]

    def evidence(self, case: Case) -> list[CommandEvidence] | None:
        """The recorded evidence of a case run for real (None for a case without a task: read from text)."""
        recorded = self.recorded(case)
        return recorded.evidence if recorded is not None else None

    def recorded(self, case: Case) -> RecordedCase | None:
        if case.task is None:
            return None
        recorded = self.recordings.get(case.key)
        if recorded is None or recorded.task != case.task or [s.command for s in recorded.steps] != self.commands(case):
            raise InputError(RECORDINGS_FILE, case.key, "no current recording of this case (its commands or task "
                             "changed): run scripts/record_cases.py")
        return recorded

    @model_validator(mode="after")
    def _no_dangling(self) -> CaseFile:
        for i, case in enumerate(self.cases):
            for s in case.steps:
                if isinstance(s, str) and s.startswith("@") and s[1:] not in self.actions:
                    raise ValueError(f"cases.{i}: unknown action {s!r}")
        return self

    def trajectory(self, case: Case) -> Trajectory:
        """The case as a trajectory: each command with its observation and the exit status it really has (from
        its recording when it was run for real)."""
        recorded = self.recorded(case)
        messages = [Message(role="user", content="task")]
        for i, step in enumerate(self.commands(case)):
            if isinstance(step, str):
                name, arguments = "execute", {"command": step}
            else:
                name, arguments = step.tool, step.arguments
            messages.append(Message(role="assistant", tool_calls=[{"id": str(i), "function": {
                "name": name, "arguments": arguments}}]))
            content = recorded.steps[i].observation if recorded is not None else \
                f"{case.outputs.get(i, 'ok')}\n[exit_code={case.exit_codes.get(i, 0)}]"
            messages.append(Message(role="tool", tool_call_id=str(i), content=content))
        traj = Trajectory(trial_id="case", task_id="case", suite="cases", student="hand", tools=[], messages=messages)
        if case.final is not None:
            messages.append(Message(role="assistant", content=case.final))
            traj.exit_status, traj.final_answer = "submitted", case.final
            traj.steps = [None] * (len(case.steps) + 1)  # type: ignore[list-item]
        return traj


def load_cases(bank: Path) -> CaseFile:
    path = Path(bank) / CASES_FILE
    if not path.is_file():
        raise InputError(str(path), None, "file not found (every bank with detectors ships its cases)")
    cases = load_toml_model(path, CaseFile)
    recordings = Path(bank) / RECORDINGS_FILE
    if recordings.is_file():
        for n, line in enumerate(recordings.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    recorded = RecordedCase.model_validate_json(line)
                except ValidationError as e:
                    raise validation_error(f"{recordings}:{n}", e) from None
                cases.recordings[recorded.key] = recorded
    return cases
