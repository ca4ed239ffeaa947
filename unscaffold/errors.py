"""Exceptions that carry a message; the agent loop and CLI use them for control flow."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`; did you mean X?` with the closest of `choices` to a mistyped `word`, or nothing where none is close:
    the tail of a one-line error about an unknown key, name or choice."""
    close = difflib.get_close_matches(word, sorted(set(choices)), n=1)
    return f"; did you mean {close[0]}?" if close else ""


class UnscaffoldError(Exception):
    """Base class: the message is shown to the user as one line."""


class InputError(UnscaffoldError):
    """Bad input on disk or on the command line; names the file and the field."""

    def __init__(self, source: str, field: str | None, problem: str) -> None:
        self.source, self.field, self.problem = source, field, problem
        where = f"{source}: {field}" if field else source
        super().__init__(f"{where}: {problem}")

    def __reduce__(self) -> tuple[type, tuple[str, str | None, str]]:
        """Picklable as raised (e.g. from a worker process)."""
        return type(self), (self.source, self.field, self.problem)


class SandboxUnavailable(UnscaffoldError):
    """The requested isolation cannot be had on this machine."""


class ModelError(UnscaffoldError):
    """A model backend failed after its retries, or with an error retries cannot fix."""


class RetryableModelError(ModelError):
    """Rate limit, server error or timeout: worth another try after a back-off."""


class ContextLengthError(ModelError):
    """The conversation no longer fits the model's context; ends the trial."""


class AuthError(ModelError):
    """Credentials were refused; ends the trial."""


class ReplayExhausted(ModelError):
    """A replay file has no entry left for this task."""


class EnvironmentBroken(UnscaffoldError):
    """The task's environment cannot be made (its image does not build): the task's fault, not the
    machine's, so running the trial again would not help."""
