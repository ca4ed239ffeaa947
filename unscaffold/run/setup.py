"""What a run loads once before its first trial (tasks, the student, the shared trial context) and the
sandbox probe: shared by the runner and by the executors that rebuild them where trials run."""

from __future__ import annotations

import shutil

from unscaffold.benchmarks import Suite, Task
from unscaffold.errors import InputError
from unscaffold.knowledge.bank import load_bank
from unscaffold.knowledge.compiler import lint_k
from unscaffold.knowledge.hstar import HStarHarness, bank_for_harness
from unscaffold.knowledge.kfolder import load_k
from unscaffold.llm.base import ModelProvider
from unscaffold.llm.oracle import OracleProvider
from unscaffold.llm.registry import load_provider
from unscaffold.llm.sampling import Sampling
from unscaffold.minimal_harness.sandbox import SandboxConfig, open_sandbox
from unscaffold.reviewer.registry import load_reviewer
from unscaffold.reviewer.throttle import ThrottledReviewers
from unscaffold.run.folder import RunFolder
from unscaffold.run.models import RunConfig
from unscaffold.run.trial import TrialContext
from unscaffold.specs import ModelSpec


def select_tasks(suite: Suite, config: RunConfig) -> list[Task]:
    if config.split and config.split not in suite.named_splits():
        named = ", ".join(sorted(suite.named_splits()))
        raise InputError("--split", None, f"suite {suite.name!r} has no split {config.split!r} "
                         + (f"(its splits: {named})" if named else "(its tasks name none)")
                         + "; give --split-file FILE (splits/README.md) or leave --split out")
    if config.task_ids:
        tasks = suite.named_tasks(config.task_ids, config.split)
        known = {t.id for t in tasks}
        missing = [t for t in config.task_ids if t not in known]
        skipped = suite.skipped_tasks()
        if missing:
            why = "; ".join(f"{t} was skipped: {skipped[t]}" for t in missing if t in skipped)
            raise InputError("--tasks", None, f"unknown task id(s) {', '.join(missing)} in suite {suite.name!r}"
                             + (f" ({why})" if why else ""))
    else:
        tasks = suite.tasks(config.split)
    if not tasks:
        raise InputError("--split" if config.split else "--tasks", None, "no tasks selected")
    return tasks


def make_provider(spec: ModelSpec, suite: Suite, tasks: list[Task], sampling: Sampling | None = None) -> ModelProvider:
    """The student; `sampling` is the run's --temperature, --top-p, --max-tokens and --sampling-seed."""
    if spec.kind == "oracle":
        if sampling is not None and sampling.given():
            raise InputError("--student", None, "oracle runs reference solutions; sampling settings "
                             f"({', '.join(sampling.given())}) do not apply")
        by_id = {t.id: t for t in tasks}
        return OracleProvider(lambda task_id: suite.oracle_commands(by_id[task_id]))
    return load_provider(spec, sampling=sampling)


def trial_context(suite: Suite, config: RunConfig) -> TrialContext:
    """Load once per run what every trial shares; bad banks, K or reviewer specs fail before any trial."""
    harness = None
    if config.harness.uses_bank:
        harness = HStarHarness(load_bank(bank_for_harness(config.harness, suite.bank_path())),
                               finish_checks=config.finish_checks)
    k = None
    reviewers = None
    if config.reviewer:
        reviewers = load_reviewer(config.reviewer)
        if config.reviewer_concurrency:
            reviewers = ThrottledReviewers(reviewers, config.reviewer_concurrency)
        if config.empty_k and config.knowledge:
            raise InputError("--empty-k", None, "the reviewer works without K: drop --knowledge")
        if config.reviewer_reads_gold:  # the gold is the task's reference solution: the suite must have one
            try:
                suite.oracle_commands(select_tasks(suite, config)[0])
            except InputError as e:
                raise InputError("--reviewer-reads-gold", None, f"no reference solution to read: {e.problem}") from None
        knowledge = None if config.empty_k else config.knowledge or suite.k_path()
        if knowledge is not None:
            k = load_k(knowledge)
            RunFolder(config.out).write_knowledge(k.root)
            problems = lint_k(k, suite.leak_markers())
            if problems:
                raise InputError(str(knowledge), None, f"K leaks the suite's answers: {problems[0]}")
    elif config.knowledge:
        raise InputError("--knowledge", None, "K is read by the reviewer: pass --reviewer too")
    elif config.reviewer_reads_gold or config.empty_k:
        flag = "--reviewer-reads-gold" if config.reviewer_reads_gold else "--empty-k"
        raise InputError(flag, None, "an option of the reviewer: pass --reviewer too")
    return TrialContext(harness=harness, reviewers=reviewers, k=k)


def probe_sandbox(config: RunConfig) -> str:
    """Fail the whole run early (one line) when the sandbox cannot start, instead of every trial."""
    if config.sandbox.kind != "local":
        return config.sandbox.kind
    probe = RunFolder(config.out).probe_dir
    sandbox = open_sandbox(SandboxConfig(kind="local", workspace=probe))
    try:
        return sandbox.isolation
    finally:
        sandbox.close()
        shutil.rmtree(probe, ignore_errors=True)
