"""Collection machinery: bounded retries of infrastructure failures, and the reviewer-call cap."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from tests.helpers import HARBOR_EXAMPLES, call, eventually, final, needs_bwrap
from unscaffold.errors import RetryableModelError, SandboxUnavailable
from unscaffold.reviewer.base import RawSubmission, ReviewRequest, ReviewSession
from unscaffold.reviewer.throttle import ThrottledReviewers
from unscaffold.run import trial as trial_module
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run


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
