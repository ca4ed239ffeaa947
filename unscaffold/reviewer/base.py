"""What every reviewer implements: open a session per proposal, hand back raw submissions on request.

The hook owns the protocol (format check, retries, budget, log); a reviewer only produces raw output,
so an LLM, a replay file and a rule table go through exactly the same checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from unscaffold.knowledge.middleware import Hint
from unscaffold.llm.types import AssistantResponse, Message, Usage

if TYPE_CHECKING:
    from unscaffold.knowledge.kfolder import K


@dataclass(frozen=True)
class ReviewRequest:
    """One pending proposal and everything a reviewer may look at (never the environment)."""

    trial_id: str
    task_id: str
    turn: int
    transcript: list[Message]  # student-visible rows only
    proposal: AssistantResponse
    hints: list[Hint] = field(default_factory=list)
    k: K | None = None
    gold: str | None = None  # ablation only (`--reviewer-reads-gold`): the task's reference solution

    def task(self) -> str:
        """The task text: the first user message (what remedies extract their arguments from)."""
        return next((m.content for m in self.transcript if m.role == "user"), "")


class ContextCut(BaseModel):
    """What the reviewer's prompt left out of the student-visible transcript (all zero: nothing)."""

    omitted_blocks: int = 0  # oldest turn blocks (a reply or a result) not shown
    omitted_turns: int = 0  # student turns among them
    omitted_chars: int = 0  # their characters
    cut_chars: int = 0  # characters elided from the newest block, when it alone was over the budget


@dataclass(frozen=True)
class RawSubmission:
    """Unchecked reviewer output. `calls`: model invocations it took (0 for a rule table)."""

    payload: str | dict[str, Any]
    usage: Usage = field(default_factory=Usage)
    calls: int = 1


class ReviewSession:
    """The review of one proposal. `next(None)` first; after an invalid submission `next(error)`.

    Returning None means: no call made, the proposal passes. `skipped` then says why, and
    `saved_call` marks a step a model would otherwise have reviewed (the cascade's savings)."""

    skipped: str | None = None
    saved_call: bool = False
    context_cut: ContextCut | None = None  # what the reviewer's prompt left out of the transcript, if it has one

    def next(self, error: str | None) -> RawSubmission | None:
        raise NotImplementedError


class NoCallSession(ReviewSession):
    """Passes without asking anyone: passthrough, or a cascade step that needs no review."""

    def __init__(self, skipped: str, saved_call: bool = False) -> None:
        self.skipped, self.saved_call = skipped, saved_call

    def next(self, error: str | None) -> RawSubmission | None:
        return None


class FixedSession(ReviewSession):
    """A decision computed up front (rules): handed over once; if it is rejected there is no second opinion."""

    def __init__(self, submission: RawSubmission) -> None:
        self.submission: RawSubmission | None = submission
        self.skipped = "no further submission"

    def next(self, error: str | None) -> RawSubmission | None:
        out, self.submission = self.submission, None
        return out


class Reviewer(Protocol):
    """Reviews one trial; `open` is called once per proposal."""

    name: str

    def open(self, request: ReviewRequest) -> ReviewSession: ...


class ReviewerFactory(Protocol):
    """Hands each trial its own reviewer, like a model provider (replay reviewers keep a cursor per trial)."""

    spec: str

    def for_trial(self, task_id: str) -> Reviewer: ...


class SharedReviewer:
    """A stateless reviewer serves every trial itself."""

    def __init__(self, reviewer: Reviewer, spec: str | None = None) -> None:
        self.reviewer, self.spec = reviewer, spec or reviewer.name

    def for_trial(self, task_id: str) -> Reviewer:
        return self.reviewer


def decision(decision: str, reason: str, **fields: Any) -> dict[str, Any]:
    """A submission payload as a reviewer that is not an LLM writes it (checked like any other)."""
    return {"decision": decision, "reason": reason, **fields}
