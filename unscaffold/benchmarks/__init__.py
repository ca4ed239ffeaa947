"""Task suites. Each is a folder declaring itself in `suite.toml` (see `unscaffold/suites.py`): its tasks, a
scorer and (where it has one) an h* bank, compiled K and sibling pool."""

from unscaffold.benchmarks.base import Score, Suite, Task
from unscaffold.benchmarks.load import load_suite

__all__ = ["Score", "Suite", "Task", "load_suite"]
