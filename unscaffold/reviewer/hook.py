"""The review hook the agent loop calls before each proposal runs: check, retry, budget, private log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from unscaffold.errors import ModelError
from unscaffold.iojson import append_jsonl
from unscaffold.knowledge.kfolder import K
from unscaffold.knowledge.middleware import triggered
from unscaffold.llm.types import AssistantResponse, Message, Usage
from unscaffold.reviewer.base import Reviewer, ReviewRequest
from unscaffold.reviewer.submission import InvalidSubmission, ReviewSubmission, check_submission

MAX_RETRIES = 3  # the recipe: an invalid submission is sent back up to three times (four attempts in all)


class ReviewCounts(BaseModel):
    """What reviewing cost one trial: `calls` is model invocations. A trial's result.json records these counts
    under the aliases (its keys since the first version), so the hook and the record cannot drift apart."""

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True)
    calls: int = Field(0, alias="reviewer_calls")
    saved_calls: int = Field(0, alias="reviewer_calls_saved")
    invalid: int = Field(0, alias="invalid_submissions")
    fallbacks: int = Field(0, alias="review_fallbacks")
    usage: Usage = Field(default_factory=Usage, alias="reviewer_usage")


class ReviewStats(ReviewCounts):
    """Per-trial counters; `reviews` is every step the hook saw."""

    reviews: int = 0
    replacements: int = 0
    skipped_budget: int = 0

    def counts(self) -> ReviewCounts:
        """What a trial's result records (the hook's own bookkeeping left out)."""
        return ReviewCounts.model_validate(self.model_dump(include=set(ReviewCounts.model_fields)))


class ReviewHook:
    """The reviewer as the agent's `review_hook` (a `ProposalFilter`). Only the returned response reaches the
    student's transcript; the rejected proposal, the reason, component ids and hints go to `log_path`
    (reviews.jsonl) alone."""

    def __init__(
        self,
        reviewer_for_trial: Reviewer,
        k: K | None,
        budget: int,
        log_path: Path,
        trial_id: str,
        task_id: str,
        max_retries: int = MAX_RETRIES,
        gold: str | None = None,
        opening: Callable[[], int] = lambda: 0,
    ) -> None:
        """`gold`: the task's reference solution, for the gold-reading reviewer of the data-source ablation.
        `opening`: how many leading messages of the transcript are the suite's opening (read per review,
        since the agent sets it when the episode starts); the middleware skips them."""
        self.reviewer, self.k, self.budget = reviewer_for_trial, k, budget
        self.opening = opening
        self.log_path, self.trial_id, self.task_id = Path(log_path), trial_id, task_id
        self.max_tries = max_retries + 1  # the first submission, then each retry
        self.known_components = set(k.component_ids()) if k is not None else None
        self.stats = ReviewStats()
        self.gold = gold

    def __call__(self, transcript: list[Message], proposal: AssistantResponse) -> AssistantResponse:
        turn = sum(1 for m in transcript if m.role == "assistant") + 1
        self.stats.reviews += 1
        line: dict[str, Any] = {
            "trial_id": self.trial_id,
            "task_id": self.task_id,
            "turn": turn,
            "reviewer": self.reviewer.name,
            "hints": [],
            "components_used": [],
            "tries": 0,
            "errors": [],
            "calls": 0,
            "proposal": proposal.model_dump(mode="json", exclude_none=True),
        }
        if self.stats.replacements >= self.budget:
            self.stats.skipped_budget += 1
            reason = f"replace budget spent ({self.stats.replacements}/{self.budget}); the reviewer is not called"
            self._log(line, decision="PASS", reason=reason, skipped="budget")
            return proposal
        hints = triggered(self.k.middleware, transcript, proposal, self.opening()) if self.k is not None else []
        line["hints"] = [h.model_dump() for h in hints]
        request = ReviewRequest(self.trial_id, self.task_id, turn, list(transcript), proposal, hints, self.k,
                                self.gold)
        session = self.reviewer.open(request)
        if session.context_cut is not None:  # counted on every line of a reviewer that reads a rendered prompt
            line["context_cut"] = session.context_cut.model_dump()
        errors: list[str] = []
        tries = calls = 0
        usage = Usage()
        submission: ReviewSubmission | None = None
        try:
            while tries < self.max_tries:
                raw = session.next(errors[-1] if errors else None)
                if raw is None:
                    break
                tries, calls, usage = tries + 1, calls + raw.calls, usage + raw.usage
                try:
                    submission = check_submission(raw.payload, self.known_components)
                    break
                except InvalidSubmission as e:
                    errors.append(str(e))
        except ModelError as e:  # the trial ends as an error; keep what happened so far
            self._count(calls, usage, errors)
            self._log(line, decision="ERROR", reason=f"{type(e).__name__}: {e}", tries=tries, errors=errors,
                      calls=calls, usage=usage.model_dump())
            raise
        self._count(calls, usage, errors)
        line.update(tries=tries, errors=errors, calls=calls, usage=usage.model_dump())
        if submission is None:
            if errors:
                self.stats.fallbacks += 1
                self._log(line, decision="PASS", reason=f"no valid submission after {tries} tries", fallback=True)
            else:
                skipped = session.skipped or "no call"
                self.stats.saved_calls += int(session.saved_call)
                self._log(line, decision="PASS", reason=f"no review ({skipped})", skipped=skipped)
            return proposal
        if submission.decision == "PASS" or submission.replacement is None:
            self._log(line, decision="PASS", reason=submission.reason, components_used=submission.components_used)
            return proposal
        self.stats.replacements += 1
        self._log(line, decision="REPLACE", reason=submission.reason, components_used=submission.components_used,
                  replacement=submission.replacement.model_dump(exclude_none=True))
        return submission.replacement.to_response(f"call_{turn}")  # ids look like any call: nothing says "reviewed"

    def _count(self, calls: int, usage: Usage, errors: list[str]) -> None:
        self.stats.calls += calls
        self.stats.usage = self.stats.usage + usage
        self.stats.invalid += len(errors)

    def _log(self, line: dict[str, Any], **fields: Any) -> None:
        """One line per step, written before the step runs, so a crash mid-command still leaves the decision."""
        append_jsonl(self.log_path, {**line, **fields})
