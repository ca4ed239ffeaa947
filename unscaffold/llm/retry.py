"""Exponential back-off for transient failures; none for auth or context-length errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from unscaffold.errors import RetryableModelError

T = TypeVar("T")


def with_retries(fn: Callable[[], T], *, attempts: int = 6, initial_s: float = 1.0, max_s: float = 60.0) -> T:
    """Call `fn`, retrying RetryableModelError; the last error is re-raised as it was."""
    retrying = Retrying(
        retry=retry_if_exception_type(RetryableModelError),
        stop=stop_after_attempt(attempts),
        wait=wait_exponential(multiplier=initial_s, max=max_s),
        reraise=True,
    )
    return retrying(fn)
