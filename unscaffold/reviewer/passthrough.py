"""`passthrough`: every proposal passes without a call; a collection run shaped like a reviewed one."""

from __future__ import annotations

from unscaffold.reviewer.base import NoCallSession, ReviewRequest, ReviewSession


class PassthroughReviewer:
    name = "passthrough"

    def open(self, request: ReviewRequest) -> ReviewSession:
        return NoCallSession("passthrough")
