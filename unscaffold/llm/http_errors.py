"""HTTP failure -> ModelError subclass, shared by the HTTP backends so they retry and stop alike."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from unscaffold.errors import AuthError, ContextLengthError, ModelError, RetryableModelError

# Wording that OpenAI, vLLM, SGLang and Anthropic use when the prompt does not fit the context.
CONTEXT_PHRASES = (
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "too many tokens",
    "prompt is too long",
    "exceeds the maximum allowed length",
)

# Statuses worth another try: request timeout, rate limit, and every server-side failure (5xx, 529).
RETRYABLE_CLIENT_STATUSES = frozenset({408, 429})


def is_context_length(message: str, code: str | None = None) -> bool:
    """True when an error says the conversation no longer fits, so retrying cannot help."""
    if code == "context_length_exceeded":
        return True
    text = message.lower()
    return any(phrase in text for phrase in CONTEXT_PHRASES)


def one_line(text: str, limit: int = 500) -> str:
    """Errors are shown as one line; servers sometimes answer with pages of HTML."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def error_for_status(where: str, status: int, message: str, code: str | None = None) -> ModelError:
    """Pick the error class for an HTTP error status; the caller raises it `from` the SDK error."""
    detail = f"{where}: HTTP {status}: {one_line(message)}"
    if status in RETRYABLE_CLIENT_STATUSES or status >= 500:
        return RetryableModelError(detail)
    if status in (401, 403):
        return AuthError(detail)
    if 400 <= status < 500 and is_context_length(message, code):
        return ContextLengthError(detail)
    return ModelError(detail)


def transport_error(where: str, message: str) -> RetryableModelError:
    """A timeout or dropped connection: the server may be restarting or busy, so try again."""
    return RetryableModelError(f"{where}: {one_line(message)}")


@contextmanager
def sdk_errors(where: str, sdk: Any, base: type[Exception], code_attr: str) -> Iterator[None]:
    """The OpenAI and Anthropic SDKs raise the same hierarchy (`APIStatusError`, `APIConnectionError`, a base
    class): statuses become ours by `error_for_status`, a dropped connection or time-out is retried, the rest
    is a ModelError. `code_attr` names where the SDK keeps the server's error code."""
    try:
        yield
    except sdk.APIStatusError as e:
        raise error_for_status(where, e.status_code, e.message, getattr(e, code_attr, None)) from e
    except sdk.APIConnectionError as e:  # includes APITimeoutError
        raise transport_error(where, f"{type(e).__name__}: {e.message}") from e
    except base as e:
        raise ModelError(f"{where}: {one_line(str(e))}") from e
