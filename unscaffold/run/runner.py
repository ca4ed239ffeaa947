"""Runs every (task, trial) of a suite concurrently; re-running the same command resumes."""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from unscaffold.benchmarks import Suite, Task, load_suite
from unscaffold.errors import InputError, UnscaffoldError
from unscaffold.minimal_harness.trajectory import now_iso
from unscaffold.notices import cause_key, note_retry
from unscaffold.outcomes import Outcome
from unscaffold.run.aggregate import aggregate
from unscaffold.run.executor import open_executor
from unscaffold.run.executor_spec import RunStopped
from unscaffold.run.folder import RunFolder, TrialFolder
from unscaffold.run.models import RunConfig, RunResults, TrialResult
from unscaffold.run.setup import make_provider, select_tasks, trial_context
from unscaffold.run.trial import record_crash

Progress = Callable[[TrialResult], None]


class RunStalled(UnscaffoldError):
    """No trial can make progress (the first wave all failed for one infrastructure cause): exit 1, not 2,
    since the input was fine and a resume runs those trials again."""

    exit_code = 1


def stalled_cause(wave: list[TrialResult]) -> str | None:
    """The one infrastructure cause every trial of the first wave failed for, or None."""
    if not wave or any(r.outcome != Outcome.INFRA_ERROR for r in wave):
        return None
    keys = {cause_key(r.reason, r.trial_id, r.task_id) for r in wave}
    return wave[0].reason if len(keys) == 1 else None


def trial_id_for(task_id: str, index: int, trials: int) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", task_id)
    return safe if trials == 1 else f"{safe}__{index}"


def check_run_dir(config: RunConfig) -> None:
    """A run folder holds one run: resuming with different settings would mix results."""
    folder = RunFolder(config.out)
    if folder.config.exists():
        mine, theirs = config.identity(), RunConfig.identity_of(folder.read_raw_config())
        if theirs != mine:
            diff = sorted(k for k in mine if mine[k] != theirs[k])
            raise InputError(str(folder.config), diff[0], f"the run in {config.out} was started with other settings "
                             f"({', '.join(diff)}); use another --out")
    folder.write_config(config)


def set_aside(trial_dir: Path) -> None:
    """Remove a half-finished trial's folder; if something in it cannot be removed, move the folder
    aside (`.stale-N`) so the trial still starts over and the run goes on. A trial killed mid-way may
    still have its filesystem mounted over its folders: those mounts go first."""
    from unscaffold.minimal_harness.sandbox.disk import unmount_below

    unmount_below(trial_dir)
    try:
        shutil.rmtree(trial_dir)
    except OSError:
        n = 1
        while trial_dir.with_name(f"{trial_dir.name}.stale-{n}").exists():
            n += 1
        trial_dir.rename(trial_dir.with_name(f"{trial_dir.name}.stale-{n}"))


def finished_event(result: TrialResult, recovered: bool = False) -> dict:
    """The event that closes a trial in events.jsonl: `trial_finished`, or `trial_infra_failed` for a
    result the next resume runs again (so `trial_finished` appears exactly once per trial)."""
    kind = "trial_infra_failed" if result.outcome == Outcome.INFRA_ERROR and result.infra_error else "trial_finished"
    event = {"event": kind, "trial_id": result.trial_id, "reward": result.reward, "outcome": result.outcome,
             "at": now_iso()}
    return {**event, "recovered": True} if recovered else event


def _saved_result(trial: TrialFolder) -> TrialResult | None:
    if not trial.finished():
        return None
    try:
        return trial.read_result()
    except InputError:  # unreadable: the trial starts over
        return None


def reconcile(plan: list[tuple[Task, str]], folder: RunFolder) -> list[tuple[Task, str]]:
    """Make events.jsonl agree with the trial folders, which are the record (`result.json` is each
    trial's commit point), and return the trials still to run.

    A run killed between a trial's `result.json` and its event left a result without its event: the
    event is written now. A result that ended in a retryable infrastructure error is pending again."""
    closed: set[str] = set()
    if folder.events.exists():
        for line in folder.events.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(event, dict) and event.get("event") == "trial_finished":
                closed.add(str(event.get("trial_id")))
    pending = []
    for task, tid in plan:
        result = _saved_result(folder.trial(tid))
        if result is None or (result.infra_error and result.outcome == Outcome.INFRA_ERROR):
            pending.append((task, tid))
        elif tid not in closed:
            folder.append_event(finished_event(result, recovered=True))
    return pending


def run(config: RunConfig, progress: Progress | None = None, on_start: Callable[[int, int], None] | None = None
        ) -> RunResults:
    """Every pending trial of the run, then results.json; the suite is closed however the run ends."""
    with load_suite(config.suite, config.data, config.split_file) as suite:
        return run_suite(suite, config, progress, on_start)


def run_suite(suite: Suite, config: RunConfig, progress: Progress | None = None,
              on_start: Callable[[int, int], None] | None = None) -> RunResults:
    tasks = select_tasks(suite, config)
    suite.check_opening(config.opening)
    provider = make_provider(config.student, suite, tasks, config.sampling)
    config.out.mkdir(parents=True, exist_ok=True)
    check_run_dir(config)
    context = trial_context(suite, config)
    folder = RunFolder(config.out)
    plan = [(task, trial_id_for(task.id, k, config.trials)) for task in tasks for k in range(config.trials)]
    pending = reconcile(plan, folder)
    executor = open_executor(config)  # local threads or Ray tasks; probes the sandbox where trials will run
    if on_start:
        on_start(len(plan), len(plan) - len(pending))
    t0 = time.monotonic()
    wave: list[TrialResult] = []
    wave_size = min(config.concurrency, len(pending))
    stalled, judged = threading.Event(), threading.Event()  # judged: the first wave made progress (or stalled)
    if wave_size >= len(pending):
        judged.set()

    def one(task: Task, trial_id: str, index: int) -> TrialResult | None:
        trial_dir = folder.trial(trial_id).root
        if index >= wave_size:  # later trials wait until the first wave shows the run can progress
            judged.wait()
        for attempt in range(1, config.infra_retries + 2):
            if stalled.is_set():  # the run is stopping: this trial stays pending for a resume
                return None
            if trial_dir.exists():  # a half-finished trial (killed run, infrastructure failure) starts over
                set_aside(trial_dir)
            trial_dir.mkdir(parents=True)
            started = now_iso()
            folder.append_event({"event": "trial_started", "trial_id": trial_id, "attempt": attempt, "at": started})
            try:
                result = executor.run_trial(suite, task, trial_id, trial_dir, provider, config, context,
                                            attempt=attempt)
            except RunStopped:
                raise
            except Exception as e:  # one trial's failure is that trial's result, never the run's end
                result = record_crash(suite, task, trial_id, trial_dir, provider.spec, e, attempt, started)
            if not result.infra_error or attempt > config.infra_retries:
                break
            folder.append_event({"event": "trial_retry", "trial_id": trial_id, "attempt": attempt,
                                  "exception": result.exception, "at": now_iso()})
            wait = min(30.0, 2.0 ** attempt)
            note_retry(result.reason, f"trial {trial_id} runs again (attempt {attempt + 1} of "
                       f"{config.infra_retries + 1})", wait, trial_id, task.id)
            time.sleep(wait)
        folder.append_event(finished_event(result))
        return result

    try:
        with ThreadPoolExecutor(max_workers=config.concurrency) as pool:
            futures = [pool.submit(one, task, tid, i) for i, (task, tid) in enumerate(pending)]
            try:
                for future in as_completed(futures):
                    result = future.result()
                    if result is None:
                        continue
                    if progress:
                        progress(result)
                    if not judged.is_set():
                        wave.append(result)
                        cause = stalled_cause(wave) if len(wave) == wave_size else None
                        if result.outcome != Outcome.INFRA_ERROR or (len(wave) == wave_size and not cause):
                            judged.set()
                        elif cause:
                            stalled.set()
                            first = "the first trial" if wave_size == 1 else \
                                f"all {wave_size} trials of the first wave"
                            raise RunStalled(f"no trial can make progress: {first} failed for infrastructure: "
                                             f"{cause}")
            except BaseException:  # Ctrl-C or a bug: start no other trial, stop those in flight, then leave
                stalled.set()
                judged.set()
                pool.shutdown(wait=False, cancel_futures=True)
                executor.stop()
                raise
    finally:
        executor.close()
    results = [folder.trial(tid).read_result() for _, tid in plan]
    summary = aggregate(suite, config, tasks, results, wall_time_s=time.monotonic() - t0)
    folder.write_results(summary)
    return summary
