"""The review hook: retries on invalid submissions, fallback, replace budget, and what reaches the student."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import reviewer_helpers as rv
from unscaffold.errors import ReplayExhausted
from unscaffold.llm.registry import load_provider
from unscaffold.minimal_harness.agent import Agent
from unscaffold.minimal_harness.sandbox import SandboxConfig
from unscaffold.minimal_harness.sandbox.none import UnisolatedSandbox
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.reviewer import ReviewHook, load_reviewer

INVALID = [
    ("{oops", "submission is not valid JSON: Expecting property name enclosed in double quotes"),
    ("[]", "submission must be a JSON object"),
    ({"decision": "MAYBE", "reason": "x"}, "decision must be PASS or REPLACE"),
    ({"decision": "PASS", "replacement": {"content": "hi"}, "reason": "x"}, "PASS carries no replacement"),
    ({"decision": "REPLACE", "reason": "x"}, "REPLACE needs a replacement"),
    ({"decision": "REPLACE", "replacement": {"reasoning": "thinking only"}, "reason": "x"},
     "the replacement needs visible content or an `execute` call"),
    ({"decision": "REPLACE", "replacement": {"tool_call": {"name": "write_file", "arguments": {"path": "a"}}},
      "reason": "x"}, "the replacement may only call `execute` (got `write_file`)"),
    ({"decision": "REPLACE", "replacement": {"tool_call": rv.exec_call("")}, "reason": "x"},
     "the replacement's `execute` call needs one non-empty string `command`"),
    ({"decision": "REPLACE", "replacement": {"tool_call": {"name": "execute",
                                                           "arguments": {"command": "ls", "cwd": "/"}}},
      "reason": "x"}, "the replacement's `execute` call needs one non-empty string `command`"),
    ({"decision": "PASS", "reason": ""}, "reason must be 1-500 characters (got 0)"),
    ({"decision": "PASS", "reason": "y" * 501}, "reason must be 1-500 characters (got 501)"),
    ({"decision": "PASS", "reason": "x", "score": 1}, "unknown field `score`"),
]


def make_hook(tmp_path: Path, entries: list, budget: int = 5, k=None, spec: str | None = None) -> ReviewHook:
    spec = spec or rv.write_replay(tmp_path / "reviewer.json", entries)
    return ReviewHook(load_reviewer(spec).for_trial("t1"), k, budget, tmp_path / "reviews.jsonl", "t1-0", "t1")


@pytest.mark.parametrize("entry,error", INVALID, ids=[e for _, e in INVALID])
def test_invalid_entry_is_retried_and_the_next_entry_decides(tmp_path: Path, entry, error) -> None:
    hook = make_hook(tmp_path, [entry, rv.replace_with("echo fixed > out.txt")])
    prop = rv.proposal("echo draft > out.txt")
    out = hook(rv.transcript(), prop)
    assert out is not prop
    assert out.tool_calls[0].arguments == {"command": "echo fixed > out.txt"}
    assert out.tool_calls[0].id == "call_1"
    assert hook.stats.model_dump(exclude={"usage"}) == {
        "reviews": 1, "calls": 2, "replacements": 1, "invalid": 1, "fallbacks": 0, "skipped_budget": 0,
        "saved_calls": 0,
    }
    [line] = rv.read_log(tmp_path / "reviews.jsonl")
    assert line["errors"] == [error]
    assert (line["decision"], line["tries"], line["calls"]) == ("REPLACE", 2, 2)
    assert "fallback" not in line


def test_unknown_components_are_invalid_when_k_is_known(tmp_path: Path) -> None:
    k = rv.write_k(tmp_path / "k")
    hook = make_hook(tmp_path, [rv.passes() | {"components_used": ["check:finish-guard", "check:made-up"]},
                                rv.passes() | {"components_used": ["check:finish-guard"]}], k=k)
    prop = rv.proposal("ls")
    assert hook(rv.transcript(), prop) is prop
    [line] = rv.read_log(tmp_path / "reviews.jsonl")
    assert line["errors"] == ["unknown components_used: check:made-up"]
    assert line["components_used"] == ["check:finish-guard"]


def test_four_invalid_submissions_fall_back_to_pass(tmp_path: Path) -> None:
    """The first submission and three retries: the fourth invalid one ends the review as a PASS."""
    hook = make_hook(tmp_path, ["nope", {"decision": "REPLACE", "reason": "x"}, {"decision": "PASS"},
                                {"decision": "PASS", "reason": "ok", "replacement": {"content": "x"}},
                                rv.replace_with("never used")])
    prop = rv.proposal("ls")
    assert hook(rv.transcript(), prop) is prop
    assert hook.reviewer.cursor.position == 4
    assert (hook.stats.calls, hook.stats.invalid, hook.stats.fallbacks, hook.stats.replacements) == (4, 4, 1, 0)
    [line] = rv.read_log(tmp_path / "reviews.jsonl")
    assert line["fallback"] is True and line["decision"] == "PASS" and line["tries"] == 4
    assert line["reason"] == "no valid submission after 4 tries"
    assert line["errors"] == ["submission is not valid JSON: Expecting value", "REPLACE needs a replacement",
                              "reason must be 1-500 characters (got 0)", "PASS carries no replacement"]


def test_a_valid_fourth_submission_decides(tmp_path: Path) -> None:
    hook = make_hook(tmp_path, ["nope", "nope", "nope", rv.replace_with("echo fixed > out.txt")])
    out = hook(rv.transcript(), rv.proposal("echo draft > out.txt"))
    assert out.tool_calls[0].arguments == {"command": "echo fixed > out.txt"}
    [line] = rv.read_log(tmp_path / "reviews.jsonl")
    assert (line["decision"], line["tries"], len(line["errors"])) == ("REPLACE", 4, 3)


def test_budget_stops_calling_the_reviewer(tmp_path: Path) -> None:
    hook = make_hook(tmp_path, [rv.replace_with("echo a > a"), rv.replace_with("echo b > b")], budget=1)
    first, second, third = rv.proposal("echo 1 > x"), rv.proposal("echo 2 > x"), rv.proposal(content="done")
    assert hook(rv.transcript(), first) is not first
    assert (hook.stats.calls, hook.reviewer.cursor.position) == (1, 1)
    assert hook(rv.transcript(rv.TASK, "echo a > a"), second) is second
    assert hook(rv.transcript(rv.TASK, "echo a > a", "echo 2 > x"), third) is third
    assert (hook.stats.calls, hook.reviewer.cursor.position) == (1, 1)
    assert (hook.stats.replacements, hook.stats.skipped_budget, hook.stats.reviews) == (1, 2, 3)
    lines = rv.read_log(tmp_path / "reviews.jsonl")
    assert [(x["turn"], x["decision"], x.get("skipped")) for x in lines] == [
        (1, "REPLACE", None), (2, "PASS", "budget"), (3, "PASS", "budget")]
    assert lines[1]["calls"] == 0 and lines[1]["proposal"]["tool_calls"][0]["arguments"] == {"command": "echo 2 > x"}


def test_budget_zero_never_calls(tmp_path: Path) -> None:
    hook = make_hook(tmp_path, [rv.replace_with("echo a")], budget=0)
    prop = rv.proposal("ls")
    assert hook(rv.transcript(), prop) is prop
    assert (hook.stats.calls, hook.reviewer.cursor.position, hook.stats.skipped_budget) == (0, 0, 1)


def test_passthrough_makes_no_call(tmp_path: Path) -> None:
    hook = make_hook(tmp_path, [], spec="passthrough")
    prop = rv.proposal("ls")
    assert hook(rv.transcript(), prop) is prop
    assert (hook.stats.reviews, hook.stats.calls, hook.stats.saved_calls) == (1, 0, 0)
    [line] = rv.read_log(tmp_path / "reviews.jsonl")
    assert (line["decision"], line["skipped"], line["tries"]) == ("PASS", "passthrough", 0)


def test_exhausted_replay_is_logged_and_raised(tmp_path: Path) -> None:
    hook = make_hook(tmp_path, [])
    with pytest.raises(ReplayExhausted):
        hook(rv.transcript(), rv.proposal("ls"))
    [line] = rv.read_log(tmp_path / "reviews.jsonl")
    assert line["decision"] == "ERROR" and line["reason"].startswith("ReplayExhausted: ")


def test_replacement_is_what_runs_and_the_review_stays_private(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    student = rv.write_replay(tmp_path / "student.json", [
        {"reasoning": "quick guess", "tool_call": rv.exec_call("echo guess > wrong.txt")},
        {"tool_call": rv.exec_call("cat fixed.txt")},
        {"content": "final"},
    ])
    secret = "SECRET-REASON: the student skipped reading the input"
    reviewer = rv.write_replay(tmp_path / "reviewer.json", [
        {"decision": "REPLACE", "reason": secret, "components_used": ["check:explore-first"],
         "replacement": {"reasoning": "I should write the checked value.",
                         "tool_call": rv.exec_call("echo checked > fixed.txt")}},
        rv.passes("reads the file it wrote"),
        rv.passes("finish is supported by the cat output"),
    ])
    traj = Trajectory(trial_id="t1-0", task_id="t1", suite="unit", student=student, tools=[])
    hook = ReviewHook(load_reviewer(reviewer).for_trial("t1"), None, 3, tmp_path / "reviews.jsonl", "t1-0", "t1")
    agent = Agent(load_provider(student).for_trial("t1"),
                  UnisolatedSandbox(SandboxConfig(kind="none", workspace=ws)), traj,
                  review_hook=hook, save_path=tmp_path / "trajectory.json")
    agent.run("write the value")
    assert traj.exit_status == "submitted" and traj.final_answer == "final"
    assert (ws / "fixed.txt").read_text() == "checked\n"
    assert not (ws / "wrong.txt").exists()
    assert traj.messages[2].tool_calls[0].function.arguments == {"command": "echo checked > fixed.txt"}
    assert traj.messages[2].reasoning_content == "I should write the checked value."
    assert traj.messages[5].content == "checked\n\n[exit_code=0]"
    assert [s.replaced for s in traj.steps] == [True, False, False]
    saved = (tmp_path / "trajectory.json").read_text()
    for private in ("guess", "wrong.txt", "SECRET-REASON", "check:explore-first", "quick guess"):
        assert private not in saved
    lines = rv.read_log(tmp_path / "reviews.jsonl")
    assert [x["decision"] for x in lines] == ["REPLACE", "PASS", "PASS"]
    assert lines[0]["reason"] == secret and lines[0]["components_used"] == ["check:explore-first"]
    assert lines[0]["proposal"]["tool_calls"][0]["arguments"] == {"command": "echo guess > wrong.txt"}
    assert lines[0]["proposal"]["reasoning"] == "quick guess"
    assert lines[0]["replacement"]["tool_call"] == rv.exec_call("echo checked > fixed.txt")
    assert (hook.stats.reviews, hook.stats.calls, hook.stats.replacements) == (3, 3, 1)


def test_hints_reach_the_reviewer_and_the_log(tmp_path: Path) -> None:
    k = rv.write_k(tmp_path / "k")
    seen = []

    class Spy:
        name = "spy"

        def open(self, request):
            seen.append(request)
            return load_reviewer("passthrough").for_trial("t1").open(request)

    hook = ReviewHook(Spy(), k, 2, tmp_path / "reviews.jsonl", "t1-0", "t1")
    hook(rv.transcript(rv.TASK, "ls"), rv.proposal(content="done"))
    [request] = seen
    assert (request.turn, request.task_id, request.k) == (2, "t1", k)
    assert [h.component_id for h in request.hints] == ["check:finish-guard"]
    [line] = rv.read_log(tmp_path / "reviews.jsonl")
    assert line["hints"][0]["instruction"] == "Before finishing, run the answer check on the output workbook."
    assert json.dumps(line["hints"]).count("check:finish-guard") == 1
