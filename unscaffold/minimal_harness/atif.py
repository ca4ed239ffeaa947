"""Export trajectories as ATIF (Harbor's Agent Trajectory Interchange Format, v1.7), so viewers,
dataset tools and other harnesses can read our runs without a parser of their own."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator

import unscaffold
from unscaffold.errors import InputError
from unscaffold.iojson import validation_error, write_json_atomic
from unscaffold.llm.types import ChatToolCall, Usage
from unscaffold.minimal_harness.trajectory import StepRecord, Trajectory
from unscaffold.strict import Strict

if TYPE_CHECKING:  # the run folder is read through its object; the run layer sits above the harness
    from unscaffold.run.folder import RunFolder

SCHEMA_VERSION: Final = "ATIF-v1.7"
AGENT_NAME = "unscaffold-minimal"

log = logging.getLogger(__name__)

# ---- the document, as the spec defines it (only what we emit or may emit; unknown keys are errors) ----


class AtifToolCall(Strict):
    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]
    extra: dict[str, Any] | None = None  # v1.7


class AtifObservationResult(Strict):
    source_call_id: str | None = None
    content: str | None = None
    extra: dict[str, Any] | None = None  # v1.7


class AtifObservation(Strict):
    results: list[AtifObservationResult]


class _UsageCounts(Strict):
    """What model calls cost: a step's in `metrics`, the trajectory's sum in `final_metrics`."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None


class AtifMetrics(_UsageCounts):
    extra: dict[str, Any] | None = None


class AtifStep(Strict):
    step_id: int = Field(ge=1)
    timestamp: str | None = None
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    message: str
    reasoning_content: str | None = None
    tool_calls: list[AtifToolCall] | None = None
    observation: AtifObservation | None = None
    metrics: AtifMetrics | None = None
    llm_call_count: int | None = Field(None, ge=0)  # v1.7
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _agent_only_fields(self) -> AtifStep:
        if self.source != "agent":
            for name in ("model_name", "reasoning_content", "tool_calls", "metrics", "llm_call_count"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} is only allowed on agent steps, not {self.source} steps")
        return self


class AtifFinalMetrics(_UsageCounts):
    """A step's usage summed over the trajectory: the same fields, named `total_*` in the document."""

    model_config = ConfigDict(alias_generator=lambda name: f"total_{name}", serialize_by_alias=True)
    steps: int | None = None
    extra: dict[str, Any] | None = Field(None, alias="extra")  # not a total: keeps its name


class AtifAgent(Strict):
    name: str
    version: str
    model_name: str | None = None
    tool_definitions: list[dict[str, Any]] | None = None
    extra: dict[str, Any] | None = None


class AtifTrajectory(Strict):
    schema_version: Literal["ATIF-v1.7"] = SCHEMA_VERSION
    session_id: str | None = None
    trajectory_id: str | None = None  # v1.7
    agent: AtifAgent
    steps: list[AtifStep] = Field(min_length=1)
    notes: str | None = None
    final_metrics: AtifFinalMetrics | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> AtifTrajectory:
        for i, step in enumerate(self.steps):
            if step.step_id != i + 1:
                raise ValueError(f"steps[{i}].step_id is {step.step_id}; step ids run 1, 2, 3, ...")
            if step.observation is None:
                continue
            ids = {c.tool_call_id for c in step.tool_calls or []}
            for result in step.observation.results:
                if result.source_call_id is not None and result.source_call_id not in ids:
                    raise ValueError(
                        f"step {step.step_id}: observation source_call_id {result.source_call_id!r} "
                        "matches no tool call of that step"
                    )
        return self


# ---- conversion ----


def _without_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _tool_call(call: ChatToolCall) -> AtifToolCall:
    """ATIF wants an object for arguments; a malformed argument string is kept verbatim in `extra`."""
    args = call.function.arguments
    if isinstance(args, dict):
        return AtifToolCall(tool_call_id=call.id, function_name=call.function.name, arguments=args)
    return AtifToolCall(
        tool_call_id=call.id, function_name=call.function.name, arguments={}, extra={"raw_arguments": args}
    )


def _metrics(usage: Usage) -> AtifMetrics:
    return AtifMetrics(prompt_tokens=usage.input_tokens, completion_tokens=usage.output_tokens, cost_usd=usage.cost_usd)


def _agent_extra(record: StepRecord | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return _without_none(
        {
            "turn": record.turn,
            "model_s": record.model_s,
            "exec_s": record.exec_s or None,
            "exit_code": record.exit_code,
            "timed_out": record.timed_out or None,
            "format_error": record.format_error,
            "replaced": record.replaced or None,
        }
    )


def trajectory_to_atif(traj: Trajectory) -> dict[str, Any]:
    """One ATIF document per trial: system/user rows become steps, each assistant turn an agent step
    whose tool results are attached as its observation (matched by tool_call_id)."""
    records = {r.message_index: r for r in traj.steps}
    steps: list[AtifStep] = []
    step_of_call: dict[str, AtifStep] = {}  # latest agent step that made each call id
    last_agent: AtifStep | None = None
    total = Usage()
    for index, message in enumerate(traj.messages):
        step_id = len(steps) + 1
        if message.role in ("system", "user"):
            steps.append(
                AtifStep(step_id=step_id, timestamp=traj.started_at, source=message.role, message=message.content)
            )
        elif message.role == "assistant":
            record = records.get(index)
            calls = [_tool_call(c) for c in message.tool_calls or []]
            step = AtifStep(
                step_id=step_id,
                timestamp=record.started_at if record else None,
                source="agent",
                message=message.content,
                reasoning_content=message.reasoning_content or None,
                tool_calls=calls or None,
                metrics=_metrics(record.usage) if record else None,
                llm_call_count=0 if traj.student == "oracle" else 1,  # the oracle calls no model
                extra=_agent_extra(record),
            )
            if record:
                total = total + record.usage
            steps.append(step)
            last_agent = step
            for call in calls:
                step_of_call[call.tool_call_id] = step
        else:  # tool: the environment's answer belongs to the agent step that asked
            owner = step_of_call.get(message.tool_call_id or "")
            source_call_id = message.tool_call_id if owner is not None else None
            if owner is None:
                owner = last_agent
            result = AtifObservationResult(source_call_id=source_call_id, content=message.content)
            if owner is None:  # a tool row before any assistant turn: keep it, as a system event
                owner = AtifStep(step_id=step_id, timestamp=traj.started_at, source="system", message="")
                steps.append(owner)
            if owner.observation is None:
                owner.observation = AtifObservation(results=[])
            owner.observation.results.append(result)
    document = AtifTrajectory(
        session_id=traj.trial_id,
        agent=AtifAgent(
            name=AGENT_NAME,
            version=unscaffold.__version__,
            model_name=traj.student,
            tool_definitions=traj.tools or None,
            extra={"harness": traj.harness},
        ),
        steps=steps,
        final_metrics=AtifFinalMetrics(
            total_prompt_tokens=total.input_tokens,
            total_completion_tokens=total.output_tokens,
            total_cost_usd=total.cost_usd,
            total_steps=len(steps),
        ),
        extra=_without_none(
            {
                "task_id": traj.task_id,
                "suite": traj.suite,
                "exit_status": traj.exit_status,
                "final_answer": traj.final_answer,
                "exception": traj.exception,
                "started_at": traj.started_at,
                "ended_at": traj.ended_at,
                "wall_s": traj.wall_s,
            }
        ),
    )
    data = document.model_dump(mode="json", exclude_none=True)
    AtifTrajectory.model_validate(data)  # what we write must read back under the same rules
    return data


def export_run(run: RunFolder, out_dir: Path | None = None) -> list[Path]:
    """Write an ATIF file for every trial of a run: next to its trajectory.json
    (`trials/<id>/trajectory.atif.json`), or flat as `<out_dir>/<id>.atif.json`. Trials with no
    messages (they failed before the first prompt) have nothing to export and are skipped."""
    if not run.trials_dir.is_dir():
        raise InputError(str(run.root), None, f"not a run folder: it has no {run.TRIALS}/ folder")
    written: list[Path] = []
    for trial in run.trials():
        source = trial.trajectory
        if not source.exists():
            continue
        traj = Trajectory.load(source)  # InputError naming the file when malformed
        if not traj.messages:
            log.warning("%s: no messages; nothing to export", source)
            continue
        try:
            document = trajectory_to_atif(traj)
        except ValidationError as e:
            raise validation_error(str(source), e, prefix="atif") from None
        target = trial.atif if out_dir is None else Path(out_dir) / f"{trial.id}.atif.json"
        write_json_atomic(target, document)
        written.append(target)
    return written
