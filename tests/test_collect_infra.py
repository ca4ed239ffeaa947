"""Collection machinery: bounded retries of infrastructure failures, and the reviewer-call cap."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import HARBOR_EXAMPLES, call, eventually, final, needs_bwrap
from unscaffold.benchmarks import load_suite
from unscaffold.errors import ModelError, RetryableModelError, SandboxUnavailable
from unscaffold.reviewer.base import RawSubmission, ReviewRequest, ReviewSession
from unscaffold.reviewer.throttle import ThrottledReviewers
from unscaffold.run import trial as trial_module
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run
from unscaffold.run.setup import make_provider, select_tasks
from unscaffold.specs import ModelSpec


@needs_bwrap
def test_sandbox_start_failure_is_retried_then_succeeds(tmp_path: Path, monkeypatch) -> None:
    real = trial_module.open_sandbox
    failures = {"hello-file": 2}

    def flaky(config):
        task = config.workspace.parent.name
        if failures.get(task, 0) > 0:
            failures[task] -= 1
            raise SandboxUnavailable("sandbox did not start")
        return real(config)

    monkeypatch.setattr(trial_module, "open_sandbox", flaky)
    monkeypatch.setattr("unscaffold.run.runner.time.sleep", lambda s: None)
    summary = run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student="oracle", out=tmp_path,
                            task_ids=["hello-file", "csv-total"], infra_retries=2))
    assert summary.per_task == {"csv-total": 1.0, "hello-file": 1.0}
    assert summary.infra_retried == 2 and summary.infra_errors == 0
    result = json.loads((tmp_path / "trials" / "hello-file" / "result.json").read_text())
    assert result["attempt"] == 3
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events if e["trial_id"] == "hello-file"] == [
        "trial_started", "trial_retry", "trial_started", "trial_retry", "trial_started", "trial_finished"]


@needs_bwrap
def test_retries_are_bounded_and_recorded(tmp_path: Path, monkeypatch) -> None:
    def broken(config):
        raise SandboxUnavailable("sandbox did not start")

    monkeypatch.setattr(trial_module, "open_sandbox", broken)
    monkeypatch.setattr("unscaffold.run.runner.time.sleep", lambda s: None)
    summary = run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student="oracle", out=tmp_path,
                            task_ids=["hello-file"], infra_retries=1))
    result = json.loads((tmp_path / "trials" / "hello-file" / "result.json").read_text())
    assert result["attempt"] == 2 and result["infra_error"] is True
    assert result["exception"] == "SandboxUnavailable: sandbox did not start"
    assert summary.infra_errors == 1


@needs_bwrap
def test_rate_limits_past_the_retries_are_infrastructure(tmp_path: Path, monkeypatch, write_replay) -> None:
    from unscaffold.llm import replay

    calls = {"n": 0}
    original = replay.ReplayModel.complete

    def limited(self, messages, tools):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RetryableModelError("429 rate limited (after 6 attempts)")
        return original(self, messages, tools)

    monkeypatch.setattr(replay.ReplayModel, "complete", limited)
    monkeypatch.setattr("unscaffold.run.runner.time.sleep", lambda s: None)
    spec = write_replay({"hello-file": [call("echo 'Hello, world!' > /app/hello.txt"), final("ok")]})
    summary = run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student=spec, out=tmp_path,
                            task_ids=["hello-file"]))
    assert summary.per_task == {"hello-file": 1.0} and summary.infra_retried == 1


class ProxyRateLimited(RetryableModelError):
    """A backend's own kind of rate limit: infrastructure by its type, whatever it is called."""


class RetryableModelErrorLookalike(ModelError):
    """Named like the retryable error, but not one: a trial it ends is the trial's failure."""


@needs_bwrap
@pytest.mark.parametrize(("error", "infra"), [(ProxyRateLimited, True), (RetryableModelErrorLookalike, False)])
def test_model_errors_are_classified_by_type_not_name(tmp_path: Path, monkeypatch, write_replay, error: type,
                                                     infra: bool) -> None:
    from unscaffold.llm import replay

    def failing(self, messages, tools):
        raise error("503 upstream")

    monkeypatch.setattr(replay.ReplayModel, "complete", failing)
    monkeypatch.setattr("unscaffold.run.runner.time.sleep", lambda s: None)
    spec = write_replay({"hello-file": [final("ok")]})
    summary = run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student=spec, out=tmp_path,
                            task_ids=["hello-file"], infra_retries=1))
    result = json.loads((tmp_path / "trials" / "hello-file" / "result.json").read_text())
    assert result["exception"] == f"{error.__name__}: 503 upstream"
    assert result["reason"] == f"{error.__name__}: 503 upstream"
    assert (result["outcome"], result["infra_error"], result["attempt"]) == ("infra_error", infra, 2 if infra else 1)
    assert summary.infra_retried == (1 if infra else 0)


def _attempt(tmp_path: Path, monkeypatch, raised: Exception) -> trial_module.TrialAttempt:
    def broken(config):
        raise raised

    monkeypatch.setattr(trial_module, "open_sandbox", broken)
    config = RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student="oracle", out=tmp_path,
                       task_ids=["hello-file"])
    suite = load_suite("harbor", HARBOR_EXAMPLES)
    tasks = select_tasks(suite, config)
    trial_dir = tmp_path / "hello-file"
    trial_dir.mkdir()
    return trial_module.attempt_trial(suite, tasks[0], "hello-file", trial_dir,
                                      make_provider(ModelSpec.parse("oracle", oracle=True), suite, tasks), config)


class NoUserNamespaces(SandboxUnavailable):
    """A sandbox's own reason for not starting."""


@needs_bwrap
def test_a_sandbox_that_would_not_start_is_kept_typed(tmp_path: Path, monkeypatch) -> None:
    done = _attempt(tmp_path, monkeypatch, NoUserNamespaces("user namespaces are off"))
    assert isinstance(done.error, NoUserNamespaces) and done.sandbox_failed
    assert (done.result.outcome, done.result.infra_error) == ("infra_error", True)
    assert done.result.exception == done.result.reason == "NoUserNamespaces: user namespaces are off"


@needs_bwrap
def test_an_os_error_in_setup_is_infrastructure_but_not_the_sandbox(tmp_path: Path, monkeypatch) -> None:
    done = _attempt(tmp_path, monkeypatch, OSError(28, "No space left on device"))
    assert isinstance(done.error, OSError) and not done.sandbox_failed
    assert (done.result.outcome, done.result.infra_error) == ("infra_error", True)
    assert done.result.exception == "OSError: [Errno 28] No space left on device"


@needs_bwrap
def test_task_failures_are_never_retried(tmp_path: Path, write_replay) -> None:
    spec = write_replay({"hello-file": [final("I give up.")]})
    summary = run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student=spec, out=tmp_path,
                            task_ids=["hello-file"]))
    assert summary.per_task == {"hello-file": 0.0} and summary.infra_retried == 0


class _SlowSession(ReviewSession):
    def __init__(self, meter: dict) -> None:
        self.meter = meter

    def next(self, error):
        """Stay inside until as many calls as the cap allows are in flight (polled up to a deadline, so a
        busy machine only slows the test); then linger briefly, giving an over-admitted call its chance
        to show up in the meter."""
        with self.meter["lock"]:
            self.meter["now"] += 1
            self.meter["max"] = max(self.meter["max"], self.meter["now"])
        m = self.meter
        eventually(lambda: m["now"] >= min(m["cap"], m["unfinished"]) or m["max"] > m["cap"])
        time.sleep(0.02)
        with self.meter["lock"]:
            self.meter["now"] -= 1
            self.meter["unfinished"] -= 1
        return RawSubmission(payload={"decision": "PASS", "reason": "ok"})


class _SlowReviewers:
    """The factory and, for every trial, the reviewer: each review is a slow session on the shared meter."""

    name = spec = "slow"

    def __init__(self, meter: dict) -> None:
        self.meter = meter

    def for_trial(self, task_id: str) -> _SlowReviewers:
        return self

    def open(self, request: ReviewRequest) -> ReviewSession:
        return _SlowSession(self.meter)


def test_reviewer_concurrency_cap() -> None:
    for limit, expected in ((1, 1), (3, 3)):
        meter = {"lock": threading.Lock(), "now": 0, "max": 0, "cap": limit, "unfinished": 8}
        factory = ThrottledReviewers(_SlowReviewers(meter), limit)
        threads = [threading.Thread(target=lambda f=factory: f.for_trial("t").open(None).next(None)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert meter["max"] == expected
