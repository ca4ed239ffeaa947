"""Exponential back-off for transient failures; none for auth or context-length errors."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from unscaffold.errors import RetryableModelError
from unscaffold.notices import note_retry

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """How a backend retries transient failures (rate limits, server errors, time-outs)."""

    attempts: int = 6
    initial_s: float = 1.0
    max_s: float = 60.0

    def call(self, fn: Callable[[], T]) -> T:
        """Call `fn`, retrying RetryableModelError; the last error is re-raised as it was."""
        retrying = Retrying(
            retry=retry_if_exception_type(RetryableModelError),
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(multiplier=self.initial_s, max=self.max_s),
            reraise=True,
            before_sleep=lambda state: _say(state, self.attempts),
        )
        return retrying(fn)


def _say(state: RetryCallState, attempts: int) -> None:
    error = state.outcome.exception() if state.outcome else None
    wait = state.next_action.sleep if state.next_action else 0.0
    note_retry(str(error), f"the model call is retried (attempt {state.attempt_number + 1} of {attempts})", wait)
