"""The agent loop of h: propose -> review hook -> execute -> observe, saved after every step."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

from unscaffold.errors import ModelError
from unscaffold.flags import flag
from unscaffold.llm.base import Model
from unscaffold.llm.output_check import repaired_response, response_problem
from unscaffold.llm.types import AssistantResponse, Message
from unscaffold.minimal_harness.evidence import CommandEvidence
from unscaffold.minimal_harness.harness import Harness, MinimalHarness
from unscaffold.minimal_harness.recorder import EvidenceRecorder, append_evidence, reset_evidence
from unscaffold.minimal_harness.sandbox.base import Sandbox
from unscaffold.minimal_harness.sandbox.result import ExecResult
from unscaffold.minimal_harness.sandbox.watchdog import workspace_overflow
from unscaffold.minimal_harness.tool import TOOL_NAME, format_problem
from unscaffold.minimal_harness.trajectory import ExitStatus, StepRecord, Trajectory, TrajectoryWriter, now_iso

DEFAULT_MAX_TURNS = 40
MaxTurns = Annotated[int, Field(ge=1, description="Student turns per trial.", json_schema_extra=flag("--max-turns"))]
# What the loop calls on each proposal: sees the visible transcript and the proposal, returns what will run (the
# proposal itself to pass). The reviewer's implementation is `unscaffold.reviewer.hook.ReviewHook`.
ProposalFilter = Callable[[list[Message], AssistantResponse], AssistantResponse]


def pass_through(transcript: list[Message], proposal: AssistantResponse) -> AssistantResponse:
    return proposal


class AgentConfig(BaseModel):
    """The limits and prices of one trial's agent loop. Each field is documented here once: `unscaffold run`
    builds its options (`flag`) and their help from these fields. The command timeout belongs to the sandbox."""

    max_turns: MaxTurns = DEFAULT_MAX_TURNS
    max_wall_s: float | None = Field(None, gt=0, description="Seconds per trial (a task's own limit wins when "
                                     "smaller).", json_schema_extra={"flag": "--max-wall"})
    max_cost_usd: float | None = Field(None, gt=0, description="USD of student tokens per trial.",
                                       json_schema_extra={"flag": "--max-cost"})
    output_cut_chars: int | None = Field(
        None, ge=0, description="Characters of a command's output the student sees: past this, the head and tail "
        "around a note of how much was elided (0: never cut). Default: the suite's, as the reference harness "
        "(12000 in the app world, whole elsewhere).", json_schema_extra=flag("--output-cut"))
    max_format_errors: int = Field(3, ge=1, description="Malformed replies in a row that end the trial.")
    price_in_per_mtok: float = Field(0.0, ge=0, description="USD per million input tokens (for cost, when the "
                                     "backend reports none).", json_schema_extra={"flag": "--price-in"})
    price_out_per_mtok: float = Field(0.0, ge=0, description="USD per million output tokens (for cost).",
                                      json_schema_extra={"flag": "--price-out"})


class AgentExit(Exception):
    """Ends the episode; the status goes into the trajectory, the message explains it."""

    def __init__(self, status: ExitStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class Agent:
    def __init__(
        self,
        model: Model,
        sandbox: Sandbox,
        trajectory: Trajectory,
        *,
        config: AgentConfig | None = None,
        review_hook: ProposalFilter = pass_through,
        save_path: Path | None = None,
        harness: Harness | None = None,
        evidence: EvidenceRecorder | None = None,
        evidence_path: Path | None = None,
    ) -> None:
        """`evidence`: the sandbox's recorder; with `evidence_path` (the trial's evidence.jsonl), each
        `execute` command then adds a line there."""
        self.model, self.sandbox, self.traj = model, sandbox, trajectory
        self.evidence = evidence if evidence_path is not None else None
        self.evidence_path = evidence_path
        self.harness = harness or MinimalHarness()
        self.config = config or AgentConfig()
        self.review_hook, self.save_path = review_hook, save_path
        self.writer = TrajectoryWriter(save_path) if save_path is not None else None
        self.format_errors_in_row = 0
        self.error: ModelError | None = None  # the model error that ended the episode, kept typed for the caller
        self._t0 = time.monotonic()

    def run(self, instruction: str, opening: list[Message] | None = None) -> Trajectory:
        """`opening`: the messages after the system prompt, when the suite starts the episode with more than
        the instruction (it then ends with the task as the last user message)."""
        self.traj.tools = self.harness.tools()
        self.traj.harness = self.harness.name
        self.traj.messages = [
            Message(role="system", content=self.harness.system_prompt()),
            *([m.model_copy() for m in opening] if opening else [Message(role="user", content=instruction)]),
        ]
        self.traj.opening_messages = len(self.traj.messages)
        if self.evidence_path is not None:
            reset_evidence(self.evidence_path)  # a trial run again starts its evidence over with its trajectory
        try:
            self.save()
            try:
                while True:
                    self.step()
            except AgentExit as e:
                self.traj.exit_status, self.traj.exit_message = e.status, str(e)
                if e.status != "submitted":
                    self.traj.exception = str(e) if e.status == "error" else None
            except ModelError as e:
                self.traj.exit_status, self.traj.exception = "error", f"{type(e).__name__}: {e}"
                self.error = e
            self.traj.ended_at = now_iso()
            self.traj.wall_s = time.monotonic() - self._t0
            self.save()
        finally:
            if self.writer is not None:
                self.writer.close()  # the last state is on disk before run() returns (or raises)
        return self.traj

    def check_limits(self) -> None:
        c = self.config
        if len(self.traj.steps) >= c.max_turns:
            raise AgentExit("turn_limit", f"reached the limit of {c.max_turns} turns")
        if c.max_wall_s is not None and time.monotonic() - self._t0 >= c.max_wall_s:
            raise AgentExit("wall_limit", f"reached the wall-time limit of {c.max_wall_s:g} s")
        if c.max_cost_usd is not None and self.traj.usage.cost_usd >= c.max_cost_usd:
            raise AgentExit("cost_limit", f"reached the cost limit of ${c.max_cost_usd:g}")

    def step(self) -> None:
        self.check_limits()
        started, t = now_iso(), time.monotonic()
        proposal = self.model.complete(self.traj.messages, self.traj.tools)
        usage = proposal.usage
        if not usage.cost_usd and (self.config.price_in_per_mtok or self.config.price_out_per_mtok):
            usage.cost_usd = (usage.input_tokens * self.config.price_in_per_mtok
                              + usage.output_tokens * self.config.price_out_per_mtok) / 1e6
        self.traj.usage = self.traj.usage + usage
        # Output no record could hold (a lone surrogate, arguments nested too deep) is a format error, never
        # reviewed: what the transcript keeps of it is repaired, and nothing of it runs.
        unkeepable = response_problem(proposal)
        response = proposal if unkeepable else self.review_hook(list(self.traj.messages), proposal)
        unkeepable = unkeepable or response_problem(response)
        record = StepRecord(
            turn=len(self.traj.steps) + 1,
            message_index=len(self.traj.messages),
            started_at=started,
            model_s=time.monotonic() - t,
            usage=proposal.usage,
            replaced=response is not proposal,
        )
        if unkeepable:
            response = repaired_response(response)
        self.traj.messages.append(response.to_message())
        self.traj.steps.append(record)
        if unkeepable:
            self.on_format_error(response, record, unkeepable)
            return
        if not response.tool_calls:
            block = self.harness.before_finish(response, self.sandbox, self.traj.messages)
            if block is not None:  # h* checks may send the student back to work
                self.traj.messages.append(Message(role="user", content=block))
                self.save()
                return
            self.traj.final_answer = response.content or ""
            self.save()
            raise AgentExit("submitted", "final answer given")
        problem = format_problem(response, self.harness.tool_names())
        if problem:
            self.on_format_error(response, record, problem)
            return
        self.format_errors_in_row = 0
        call = response.tool_calls[0]
        t = time.monotonic()
        record.command = call.arguments.get("command") if call.name == TOOL_NAME and call.arguments else None
        recording = self.evidence is not None and record.command is not None
        if recording and self.evidence is not None:
            self.evidence.begin()
        result = self.harness.run_call(call, self.sandbox, self.sandbox.config.timeout_s, self.traj.messages)
        record.exec_s, record.exit_code, record.timed_out = time.monotonic() - t, result.exit_code, result.timed_out
        if recording:
            self.record_evidence(record, result)
        seen = result.observation(self.config.output_cut_chars or None)  # the suite's cut, where the run has one
        observation = Message(role="tool", tool_call_id=call.id, name=call.name, content=seen)
        self.traj.messages.append(observation)
        self.save()
        overflow = workspace_overflow(Path(self.sandbox.config.workspace), self.sandbox.config.limits)
        if overflow:
            raise AgentExit("resource_limit", f"the trial was stopped: {overflow}")

    def record_evidence(self, record: StepRecord, result: ExecResult) -> None:
        """The command's evidence line; a recorder that fails leaves a line saying none was collected
        (the detectors then read the command's text), never a failed trial."""
        assert self.evidence is not None and self.evidence_path is not None and record.command is not None
        step, command = len(self.traj.steps) - 1, record.command
        try:
            line = self.evidence.collect(step, record.message_index, command, result)
        except Exception:
            line = CommandEvidence(step=step, message_index=record.message_index, command=command,
                                   exit_code=result.exit_code, timed_out=result.timed_out, recorder="none")
        append_evidence(self.evidence_path, line)

    def on_format_error(self, response: AssistantResponse, record: StepRecord, problem: str) -> None:
        record.format_error = problem
        for call in response.tool_calls:  # every call id gets an answer, so the transcript stays valid
            self.traj.messages.append(Message(role="tool", tool_call_id=call.id, name=call.name, content=problem))
        if not response.tool_calls:  # a malformed final answer: the problem comes back as the next user turn
            self.traj.messages.append(Message(role="user", content=problem))
        self.format_errors_in_row += 1
        self.save()
        if self.format_errors_in_row >= self.config.max_format_errors:
            raise AgentExit("format_errors", f"{self.format_errors_in_row} malformed replies in a row")

    def save(self) -> None:
        if self.writer is not None:
            self.writer.submit(self.traj)
