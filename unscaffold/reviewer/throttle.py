"""A cap on reviewer calls in flight, separate from how many trials run at once.

Collection may run 64 trials against a student server while the reviewer's API allows far fewer
concurrent requests; the cap holds each model call (not the whole review) under a shared semaphore."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import Any

from unscaffold.reviewer.base import ContextCut, RawSubmission, Reviewer, ReviewerFactory, ReviewRequest, ReviewSession


class _ThrottledSession(ReviewSession):
    def __init__(self, inner: ReviewSession, gate: AbstractContextManager[Any]) -> None:
        self.inner, self.gate = inner, gate

    @property
    def skipped(self) -> str | None:  # type: ignore[override]
        return self.inner.skipped

    @property
    def saved_call(self) -> bool:  # type: ignore[override]
        return self.inner.saved_call

    @property
    def context_cut(self) -> ContextCut | None:  # type: ignore[override]
        return self.inner.context_cut

    def next(self, error: str | None) -> RawSubmission | None:
        with self.gate:
            return self.inner.next(error)


class _ThrottledReviewer:
    def __init__(self, inner: Reviewer, gate: AbstractContextManager[Any]) -> None:
        self.inner, self.gate, self.name = inner, gate, inner.name

    def open(self, request: ReviewRequest) -> ReviewSession:
        return _ThrottledSession(self.inner.open(request), self.gate)


class ThrottledReviewers:
    """Wraps a reviewer factory; every trial's reviewer shares one gate of `limit` slots (a semaphore in
    this process, or a cluster-wide one such as `collect.call_slots.RaySlot`)."""

    def __init__(self, inner: ReviewerFactory, limit: int, gate: AbstractContextManager[Any] | None = None) -> None:
        self.inner, self.spec = inner, inner.spec
        self.gate = gate if gate is not None else threading.BoundedSemaphore(limit)
        self.limit = limit

    def for_trial(self, task_id: str) -> _ThrottledReviewer:
        return _ThrottledReviewer(self.inner.for_trial(task_id), self.gate)
