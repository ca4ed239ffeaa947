"""`replay:FILE` as a reviewer: each entry is a raw submission (object or raw text), used in order per trial.

Entries go through the same format check as LLM output, so an invalid entry makes the hook ask again
and the next entry answers; each entry counts as one model call."""

from __future__ import annotations

from pathlib import Path

from unscaffold.llm.replay import ReplayCursor, ReplayFile
from unscaffold.reviewer.base import RawSubmission, ReviewRequest, ReviewSession


class ReplaySession(ReviewSession):
    def __init__(self, cursor: ReplayCursor) -> None:
        self.cursor = cursor

    def next(self, error: str | None) -> RawSubmission | None:
        return RawSubmission(payload=self.cursor.next_entry(), calls=1)


class ReplayReviewer:
    """One trial's reviewer; `cursor.position` is the number of entries consumed."""

    def __init__(self, name: str, cursor: ReplayCursor) -> None:
        self.name, self.cursor = name, cursor

    def open(self, request: ReviewRequest) -> ReviewSession:
        return ReplaySession(self.cursor)


class ReplayReviewerFactory:
    def __init__(self, spec: str, path: Path, latency_s: float = 0.0) -> None:
        self.spec, self.latency_s = spec, latency_s
        self.file = ReplayFile(path)

    def for_trial(self, task_id: str) -> ReplayReviewer:
        return ReplayReviewer(self.spec, ReplayCursor(self.file, task_id, self.latency_s))
