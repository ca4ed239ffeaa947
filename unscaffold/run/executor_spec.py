"""`--executor`: the spec (its grammar: unscaffold/specs/executor.py) and what the executors and preflight
share about it, so it depends on neither."""

from __future__ import annotations

from unscaffold.errors import UnscaffoldError
from unscaffold.specs.executor import FLAG, ExecutorSpec

INSTALL_RAY = "Ray is not installed here: install it with `pip install 'unscaffold[ray]'`"

__all__ = ["FLAG", "INSTALL_RAY", "ExecutorSpec", "RunStopped"]


class RunStopped(UnscaffoldError):
    """The run is stopping (Ctrl-C): the attempt was abandoned and its trial stays unfinished for resume."""
