"""Task suites. Each ships its tasks, a scorer and (where it has one) an h* bank and compiled K."""

from unscaffold.benchmarks.base import Score, Suite, Task
from unscaffold.benchmarks.registry import SUITES, load_suite

__all__ = ["SUITES", "Score", "Suite", "Task", "load_suite"]
