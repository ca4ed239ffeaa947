"""One trial: set up the workspace, run the student under h, score, write `result.json` last."""

from __future__ import annotations

import contextlib
import json
import math
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from unscaffold.benchmarks.base import Score, Suite, Task
from unscaffold.errors import EnvironmentBroken, RetryableModelError, SandboxUnavailable
from unscaffold.knowledge.hstar import HStarHarness
from unscaffold.knowledge.kfolder import K
from unscaffold.llm.base import ModelProvider
from unscaffold.minimal_harness.agent import Agent, pass_through
from unscaffold.minimal_harness.harness import Harness
from unscaffold.minimal_harness.recorder import EvidenceRecorder
from unscaffold.minimal_harness.sandbox import open_sandbox
from unscaffold.minimal_harness.sandbox.base import DOCKER_ADVICE
from unscaffold.minimal_harness.sandbox.disk import disk_note, open_trial_disk
from unscaffold.minimal_harness.trajectory import Trajectory, now_iso
from unscaffold.outcomes import COMPLETED_OUTCOMES, Outcome
from unscaffold.reviewer.base import ReviewerFactory
from unscaffold.reviewer.hook import ReviewCounts, ReviewHook
from unscaffold.run.folder import TrialFolder
from unscaffold.run.models import RunConfig, TrialResult

MAX_REASON = 1000
MAX_DETAILS_CHARS = 20_000  # a scorer's details beyond this are cut to a note (they reach reports)
INFRA_MODEL_ERRORS: tuple[type[Exception], ...] = (RetryableModelError,)  # the service, not the trial, failed
INFRA_SETUP_ERRORS: tuple[type[Exception], ...] = (SandboxUnavailable, OSError)  # while setting up: the machine
ORACLE_TAIL = 400  # characters of a failed reference command's output quoted in the reason
MAX_GAPS_LISTED = 4  # environment lines the sandbox skipped, quoted in the reason (all are in details)


def decide_outcome(score: Score, traj: Trajectory, infra: bool, gaps: list[str] | None = None,
                   oracle_error: str | None = None) -> tuple[Outcome, str]:
    """The trial's outcome and a sentence a person can act on (empty only when it passed). A reward that
    is not a finite number in [0, 1] is the scorer's error, never a score. A trial that did not pass is
    the environment's when the sandbox could not set it up (`gaps`) or the reference solution failed."""
    if infra or (traj.exception and traj.exit_status == "error" and score.outcome is None):
        return Outcome.INFRA_ERROR, (traj.exception or "the model service failed")[:MAX_REASON]
    if score.outcome is not None:
        outcome, reason = score.outcome, score.reason or str(score.outcome)
    elif not math.isfinite(score.reward) or not 0.0 <= score.reward <= 1.0:
        outcome, reason = Outcome.VERIFIER_ERROR, f"the scorer returned the reward {score.reward!r}, outside [0, 1]"
    elif score.reward >= 1.0:
        return Outcome.PASSED, ""
    else:
        reasons = [r for r in (score.reason, traj.exit_message if traj.exit_status != "submitted" else None) if r]
        outcome, reason = Outcome.FAILED, "; ".join(reasons) or f"reward {score.reward:g}"
    if oracle_error and outcome != Outcome.ENVIRONMENT_ERROR:
        outcome, reason = Outcome.ENVIRONMENT_ERROR, f"{oracle_error}; then: {reason}"
    if gaps:
        listed = "; ".join(gaps[:MAX_GAPS_LISTED]) + (f"; and {len(gaps) - MAX_GAPS_LISTED} more (see details)"
                                                      if len(gaps) > MAX_GAPS_LISTED else "")
        outcome, reason = Outcome.ENVIRONMENT_UNSUPPORTED, (
            f"the sandbox could not set up the task's environment ({listed}): {DOCKER_ADVICE}; then: {reason}")
    return outcome, reason[:MAX_REASON]


def oracle_failure(traj: Trajectory) -> str | None:
    """The reference solution's first command that failed: its exit code and the tail of its output."""
    for step in traj.steps:
        if step.exit_code in (None, 0):
            continue
        observation = traj.messages[step.message_index + 1].content if step.message_index + 1 < len(
            traj.messages) else ""
        tail = " ".join((observation or "").split())[-ORACLE_TAIL:]
        ran = "timed out" if step.timed_out else f"exited {step.exit_code}"
        return f"the reference solution {ran} (`{(step.command or '')[:80]}`)" + (f", ending: {tail}" if tail else "")
    return None


def bounded_details(details: dict) -> dict:
    """A scorer's details, unless they are too large (or too deep) to belong in result.json."""
    try:
        text = json.dumps(details, default=str, allow_nan=False)
    except (ValueError, RecursionError, TypeError) as e:
        return {"note": f"details dropped: {type(e).__name__}"}
    if len(text) > MAX_DETAILS_CHARS:
        return {"note": f"details dropped: {len(text):,} characters, over {MAX_DETAILS_CHARS:,}"}
    return json.loads(text)  # plain JSON values only


def output_cut(suite: Suite, config: RunConfig) -> int | None:
    """The run's `--output-cut` (0: never), else the suite's own (the reference harness's)."""
    chosen = config.agent.output_cut_chars
    return suite.output_cut_chars if chosen is None else (chosen or None)


@dataclass
class TrialAttempt:
    """A trial's result and the exception that ended it (None when it ended on its own), kept as raised so
    callers decide by its type, never by reading `result.exception` back."""

    result: TrialResult
    error: BaseException | None = None

    @property
    def sandbox_failed(self) -> bool:
        """The sandbox would not start: the machine's fault (an executor may stop sending trials to it)."""
        return self.result.infra_error and isinstance(self.error, SandboxUnavailable)


class TrialContext:
    """What every trial of a run shares: the harness, the reviewer factory and K."""

    def __init__(self, harness: Harness | None = None, reviewers: ReviewerFactory | None = None,
                 k: K | None = None) -> None:
        self.harness, self.reviewers, self.k = harness, reviewers, k


def run_trial(
    suite: Suite,
    task: Task,
    trial_id: str,
    trial_dir: Path,
    provider: ModelProvider,
    config: RunConfig,
    context: TrialContext | None = None,
    attempt: int = 1,
) -> TrialResult:
    """Never raises for a task-level failure: a crash is recorded in the result with reward 0.

    `infra_error` marks failures of the machinery, not the task (the sandbox would not start, the model
    service stayed rate-limited or down past its retries): the runner may run those trials again."""
    return attempt_trial(suite, task, trial_id, trial_dir, provider, config, context, attempt).result


def attempt_trial(suite: Suite, task: Task, trial_id: str, trial_dir: Path, provider: ModelProvider,
                  config: RunConfig, context: TrialContext | None = None, attempt: int = 1) -> TrialAttempt:
    """`run_trial`, with the exception that ended the trial kept typed beside its result."""
    context = context or TrialContext()
    error: BaseException | None = None
    hook = None
    started, t0 = now_iso(), time.monotonic()
    traj = Trajectory(trial_id=trial_id, task_id=task.id, suite=suite.name, student=provider.spec, tools=[])
    isolation = ""
    folder = TrialFolder(trial_dir)
    folder.reviews.touch()
    in_setup, scoring = True, False
    try:
        sandbox_config = suite.prepare(task, trial_dir, config.sandbox.kind, oracle=provider.spec == "oracle")
        sandbox_config.timeout_s = config.sandbox.command_timeout_s
        sandbox_config.base_images = config.sandbox.substitutes()
        if isinstance(context.harness, HStarHarness):
            sandbox_config.mounts.append(context.harness.mount())
        # What each command did (evidence.jsonl): its spool is a writable folder, so on the trial's disk too.
        recorder = EvidenceRecorder.attach(sandbox_config)
        with contextlib.ExitStack() as stack:
            stack.callback(recorder.close)
            # Disk bounded as it is written, from before the task's services start (they may write there too);
            # by default nothing of the trial but its record stays on the host.
            disk = open_trial_disk(sandbox_config)
            if disk is not None:
                stack.callback(disk.close, keep=config.sandbox.keep_workspace)
            stack.enter_context(suite.services(task, trial_dir))  # e.g. a server holding the task's world
            sandbox = open_sandbox(sandbox_config)
            isolation = sandbox.isolation + (disk_note(disk, config.sandbox.keep_workspace) if disk else "")
            in_setup = False
            try:
                walls = [w for w in (task.agent_timeout_s, config.agent.max_wall_s) if w]
                agent_config = config.agent.model_copy(update={"max_wall_s": min(walls) if walls else None,
                                                               "output_cut_chars": output_cut(suite, config)})
                if context.reviewers is not None:
                    gold = "\n".join(suite.oracle_commands(task)) if config.reviewer_reads_gold else None
                    hook = ReviewHook(context.reviewers.for_trial(task.id), context.k, config.budget,
                                      folder.reviews, trial_id, task.id, gold=gold,
                                      opening=lambda: traj.opening_messages)
                agent = Agent(provider.for_trial(task.id), sandbox, traj, config=agent_config,
                              save_path=folder.trajectory, harness=context.harness,
                              review_hook=hook or pass_through, evidence=recorder,
                              evidence_path=folder.evidence)
                agent.run(task.instruction, suite.opening(task, trial_dir, suite.check_opening(config.opening)))
                error = agent.error
                scoring = True
                score = suite.score(task, trial_dir, sandbox, traj)
            finally:
                sandbox.close()
    except Exception as e:  # a bug or infrastructure failure in one trial must not lose the others
        error = e
        infra = in_setup and isinstance(e, INFRA_SETUP_ERRORS)
        traj.exit_status = "error"
        traj.exception = f"{type(e).__name__}: {e}"
        traj.save(folder.trajectory)
        where = "the verifier" if scoring else ("setting up the trial" if in_setup else "the trial")
        broken = isinstance(e, EnvironmentBroken)
        score = Score(reward=0.0, reason=str(e) if broken else f"{where} crashed: {traj.exception}"[:MAX_REASON],
                      details={"traceback": traceback.format_exc(limit=8)[-4000:]},
                      outcome=Outcome.ENVIRONMENT_ERROR if broken else Outcome.VERIFIER_ERROR if scoring
                      else Outcome.INFRA_ERROR)
    else:
        infra = isinstance(error, INFRA_MODEL_ERRORS)
    oracle = oracle_failure(traj) if provider.spec == "oracle" else None
    gaps = suite.environment_gaps(task, config.sandbox.kind)
    outcome, reason = decide_outcome(score, traj, infra, gaps, oracle)
    if gaps and outcome != Outcome.PASSED:
        score.details["environment_gaps"] = gaps
    result = TrialResult(
        trial_id=trial_id,
        task_id=task.id,
        scenario=task.scenario,
        reward=score.reward if outcome in COMPLETED_OUTCOMES else 0.0,
        outcome=outcome,
        reason=reason,
        environment_notes=suite.environment_notes(task, config.sandbox.kind),
        details=bounded_details(score.details),
        exit_status=traj.exit_status,
        exception=traj.exception,
        infra_error=infra,
        attempt=attempt,
        turns=len(traj.steps),
        format_errors=sum(1 for s in traj.steps if s.format_error),
        replacements=sum(1 for s in traj.steps if s.replaced),
        review=hook.stats.counts() if hook else ReviewCounts(),
        student_usage=traj.usage,
        isolation=isolation,
        wall_s=time.monotonic() - t0,
        started_at=started,
        ended_at=now_iso(),
    )
    folder.write_result(result)
    return TrialAttempt(result, error)


def record_crash(suite: Suite, task: Task, trial_id: str, trial_dir: Path, student: str, error: Exception,
                 attempt: int, started_at: str) -> TrialResult:
    """A trial whose run raised past `run_trial`'s own guard (a bug, or a record that could not be written):
    recorded as that trial's failure, not run again, so the run and the other trials go on. What the trial
    saved of its trajectory stays."""
    exception = f"{type(error).__name__}: {error}"
    folder = TrialFolder(trial_dir)
    if not folder.trajectory.exists():
        Trajectory(trial_id=trial_id, task_id=task.id, suite=suite.name, student=student, tools=[],
                   exit_status="error", exception=exception).save(folder.trajectory)
    folder.reviews.touch()
    result = TrialResult(trial_id=trial_id, task_id=task.id, scenario=task.scenario, reward=0.0,
                         outcome=Outcome.INFRA_ERROR, reason=f"the trial crashed: {exception}"[:MAX_REASON],
                         details={"traceback": traceback.format_exc(limit=8)[-4000:]}, exit_status="error",
                         exception=exception, attempt=attempt, started_at=started_at, ended_at=now_iso())
    folder.write_result(result)
    return result


def record_infra_failure(suite: Suite, task: Task, trial_id: str, trial_dir: Path, student: str, exception: str,
                         attempt: int, started_at: str) -> TrialResult:
    """An attempt that never reported back (its worker or its node died), recorded as `run_trial` records a
    failure of the machinery: the runner retries it, and the folder reads like any other trial's."""
    traj = Trajectory(trial_id=trial_id, task_id=task.id, suite=suite.name, student=student, tools=[],
                      exit_status="error", exception=exception)
    folder = TrialFolder(trial_dir)
    traj.save(folder.trajectory)
    folder.reviews.touch()
    result = TrialResult(trial_id=trial_id, task_id=task.id, scenario=task.scenario, reward=0.0,
                         outcome=Outcome.INFRA_ERROR, reason=exception[:MAX_REASON], exit_status="error",
                         exception=exception, infra_error=True,
                         attempt=attempt, started_at=started_at, ended_at=now_iso())
    folder.write_result(result)
    return result
