"""Where trials run: threads on this machine (`local`) or tasks on a Ray cluster (`ray[:ADDRESS]`).

The runner owns the run folder, events, retries and resume; an executor only runs one attempt of a trial
so that its folder ends as `run_trial` leaves it, `result.json` written last. So every executor gives the
same run folder and the same guarantees."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from unscaffold.benchmarks.base import Suite, Task
from unscaffold.errors import InputError
from unscaffold.llm.base import ModelProvider
from unscaffold.run.executor_spec import FLAG, INSTALL_RAY
from unscaffold.run.models import RunConfig, TrialResult
from unscaffold.run.setup import probe_sandbox
from unscaffold.run.trial import TrialContext, run_trial


class Executor(Protocol):
    """Runs one attempt of a trial into `trial_dir` (which exists and is empty); never raises for a failed
    trial, only RunStopped once `stop` was called."""

    def run_trial(self, suite: Suite, task: Task, trial_id: str, trial_dir: Path, provider: ModelProvider,
                  config: RunConfig, context: TrialContext, attempt: int = 1) -> TrialResult: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...


class LocalExecutor:
    """Trials in this process (the runner's threads), sandboxes on this machine."""

    def __init__(self, config: RunConfig) -> None:
        probe_sandbox(config)

    def run_trial(self, suite: Suite, task: Task, trial_id: str, trial_dir: Path, provider: ModelProvider,
                  config: RunConfig, context: TrialContext, attempt: int = 1) -> TrialResult:
        return run_trial(suite, task, trial_id, trial_dir, provider, config, context, attempt=attempt)

    def stop(self) -> None:
        """Running trials finish and commit (a sandbox cannot be interrupted from another thread)."""

    def close(self) -> None:
        pass


def open_executor(config: RunConfig) -> Executor:
    """The executor `config.executor` names, ready to run (its sandboxes probed where trials will run)."""
    spec = config.executor
    if spec.kind == "local":
        return LocalExecutor(config)
    try:
        import ray  # noqa: F401
    except ImportError:
        raise InputError(FLAG, None, INSTALL_RAY) from None
    from unscaffold.run.ray_executor import RayExecutor

    try:
        return RayExecutor(config, spec)
    except ConnectionError as e:  # Ray's own answer for an address where no cluster runs (`--no-preflight`)
        first = (str(e).strip().splitlines() or [type(e).__name__])[0].rstrip(".")
        raise InputError(FLAG, None, f"no Ray cluster answers at {spec.address}: {first}; "
                         "start one with `ray start --head`, or use --executor ray") from None
