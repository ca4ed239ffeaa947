"""Model and reviewer output no record can hold (a lone surrogate, arguments nested hundreds deep) is
that trial's format error: the trajectory is saved, the run finishes, the other trials keep their results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.helpers import call, final, needs_bwrap
from tests.test_agent_loop import make_agent
from tests.test_hostile_runs import HONEST_VERIFIER, harbor_task
from unscaffold.cli import app
from unscaffold.iojson import append_jsonl, write_json_atomic
from unscaffold.llm.json_bounds import (
    MAX_DEPTH,
    TooDeep,
    loads_bounded,
    repair_text,
    repair_value,
    text_depth,
    value_depth,
)
from unscaffold.llm.output_check import repaired_response, response_problem
from unscaffold.llm.qwen_parse import parse_completion
from unscaffold.llm.types import AssistantResponse, ToolCall, parse_arguments
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.reviewer.submission import InvalidSubmission, check_submission
from unscaffold.run import executor as executor_module
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run
from unscaffold.sft.build import build_sft

SURROGATE = "\udfff"
ENCODING = "Format error: the tool arguments cannot be encoded as UTF-8 (it holds a lone surrogate)."
TOO_DEEP = f"Format error: the tool arguments are nested deeper than {MAX_DEPTH} levels."


def nested(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"a": value}
    return value


def deep_call(levels: int = 300) -> dict[str, Any]:
    return {"tool_call": {"name": "execute", "arguments": {"command": "ls", "x": nested(levels)}}}


def test_text_depth_skips_strings_and_escapes() -> None:
    assert text_depth('{"a": [1, "[[[\\"[[", {"b": "}}"}]}') == 3
    assert text_depth("[" * 300 + "]" * 300) == 300
    assert text_depth('"[[[') == 0  # an unterminated string holds the rest


def test_loads_bounded_refuses_deep_json_before_parsing() -> None:
    assert loads_bounded(json.dumps(nested(MAX_DEPTH - 1))) == nested(MAX_DEPTH - 1)
    with pytest.raises(TooDeep, match=f"^nested deeper than {MAX_DEPTH} levels$"):
        loads_bounded("[" * 100_000 + "]" * 100_000)  # json.loads would raise RecursionError


def test_repairs() -> None:
    assert repair_text(f"a{SURROGATE}b") == "a\ufffdb"
    assert repair_text("\ud83d\ude00") == "\U0001f600"  # a pair is its character
    assert value_depth(nested(300)) == MAX_DEPTH + 1  # counted no further than needed
    repaired = repair_value({"k" + SURROGATE: [nested(300)]}, limit=4)
    assert repaired == {"k\ufffd": [{"a": {"a": "(nested deeper than 4 levels; not kept)"}}]}


def test_parse_arguments_keeps_too_deep_json_as_text() -> None:
    raw = json.dumps({"command": "ls", "x": nested(300)})
    parsed = parse_arguments("c1", "execute", raw)
    assert parsed.arguments is None and parsed.raw_arguments == raw
    assert response_problem(AssistantResponse(tool_calls=[parsed])) == TOO_DEEP
    body = '<tool_call>\n{"name": "execute", "arguments": ' + "[" * 50_000 + "]" * 50_000 + "}\n</tool_call>"
    response = parse_completion(body)
    assert response.tool_calls[0].arguments is None  # not a RecursionError


@pytest.mark.parametrize(("response", "problem"), [
    (AssistantResponse(content=f"done {SURROGATE}"),
     "Format error: the reply text cannot be encoded as UTF-8 (it holds a lone surrogate)."),
    (AssistantResponse(reasoning=SURROGATE, content="ok"),
     "Format error: the reasoning cannot be encoded as UTF-8 (it holds a lone surrogate)."),
    (AssistantResponse(tool_calls=[ToolCall(id="c", name="execute", arguments={"command": f"echo {SURROGATE}"})]),
     ENCODING),
    (AssistantResponse(tool_calls=[ToolCall(id="c", name="execute", arguments={"command": "ls", "x": nested(300)})]),
     TOO_DEEP),
    (AssistantResponse(content="fine", tool_calls=[ToolCall(id="c", name="execute", arguments={"command": "ls"})]),
     None),
])
def test_response_problem(response: AssistantResponse, problem: str | None) -> None:
    assert response_problem(response) == problem
    repaired = repaired_response(response)
    assert response_problem(repaired) is None
    json.dumps(repaired.to_message().model_dump(mode="json")).encode("utf-8")  # every writer takes it


@pytest.mark.parametrize(("submission", "error"), [
    ({"decision": "PASS", "reason": f"fine {SURROGATE}"},
     "submission holds text that cannot be encoded as UTF-8 (a lone surrogate)"),
    ('{"decision": "PASS", "reason": "fine \\udfff"}',
     "submission holds text that cannot be encoded as UTF-8 (a lone surrogate)"),
    ('{"decision": "PASS", "reason": "r", "components_used": ' + "[" * 300 + "]" * 300 + "}",
     f"submission is nested deeper than {MAX_DEPTH} levels"),
    ({"decision": "REPLACE", "reason": "r",
      "replacement": {"tool_call": {"name": "execute", "arguments": '{"command": "echo \\udfff"}'}}},
     "submission holds text that cannot be encoded as UTF-8 (a lone surrogate)"),
])
def test_reviewer_submissions_that_cannot_be_kept_are_sent_back(submission: Any, error: str) -> None:
    with pytest.raises(InvalidSubmission) as e:
        check_submission(submission)
    assert str(e.value) == error


def test_records_are_written_repaired(tmp_path: Path) -> None:
    write_json_atomic(tmp_path / "a.json", {"text": SURROGATE, "deep": nested(300)})
    saved = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    assert saved["text"] == "\ufffd" and value_depth(saved["deep"], 1000) == 63  # the record is level 64
    append_jsonl(tmp_path / "b.jsonl", {"line": SURROGATE})
    assert json.loads((tmp_path / "b.jsonl").read_text(encoding="utf-8")) == {"line": "\ufffd"}
    traj = Trajectory(trial_id="t", task_id="t", suite="s", student="m", tools=[], final_answer=SURROGATE)
    traj.save(tmp_path / "t.json")
    assert Trajectory.load(tmp_path / "t.json").final_answer == "\ufffd"


def test_agent_records_unkeepable_output_as_format_errors(tmp_path: Path, write_replay) -> None:
    spec = write_replay({"t1": [call(f"echo {SURROGATE}"), deep_call(), final(f"answer {SURROGATE}"),
                                final("done")]})
    traj = make_agent(tmp_path, spec, max_format_errors=4).run("x")
    assert [s.format_error for s in traj.steps] == [
        ENCODING, TOO_DEEP, "Format error: the reply text cannot be encoded as UTF-8 (it holds a lone surrogate).",
        None]
    assert traj.exit_status == "submitted" and traj.final_answer == "done"
    assert [m.role for m in traj.messages[2:]] == ["assistant", "tool", "assistant", "tool", "assistant", "user",
                                                   "assistant"]
    assert all(s.exit_code is None for s in traj.steps)  # nothing of it ran
    saved = Trajectory.load(tmp_path / "trajectory.json")
    assert saved.messages[2].tool_calls[0].function.arguments == {"command": "echo \ufffd"}
    assert saved.messages[6].content == "answer \ufffd"


@needs_bwrap
def test_run_survives_unkeepable_output_and_a_crashing_trial(tmp_path: Path, write_replay, monkeypatch) -> None:
    for name in ("surrogate", "deep", "answer", "crash", "honest"):
        harbor_task(tmp_path / "tasks", name, HONEST_VERIFIER)
    spec = write_replay({
        "surrogate": [call(f"echo {SURROGATE} > /app/out.txt"), final("done")],
        "deep": [deep_call(), final("done")],
        "answer": [final(f"answer {SURROGATE}"), final("done")],
        "crash": [final("done")],
        "honest": [call("echo ok > /app/out.txt"), final("done")],
    })
    real = executor_module.run_trial

    def crash_one(suite, task, *args, **kwargs):  # a bug past run_trial's own guard, in one trial only
        if task.id == "crash":
            raise RuntimeError("boom")
        return real(suite, task, *args, **kwargs)

    monkeypatch.setattr(executor_module, "run_trial", crash_one)
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "harbor", "--data", str(tmp_path / "tasks"), "--student", spec,
                                      "--concurrency", "5", "--out", str(out)])
    assert result.exit_code == 0, result.output
    per_task = json.loads((out / "results.json").read_text())["per_task"]
    assert per_task == {"answer": 0.0, "crash": 0.0, "deep": 0.0, "honest": 1.0, "surrogate": 0.0}
    results = {n: json.loads((out / "trials" / n / "result.json").read_text()) for n in per_task}
    assert {n: r["format_errors"] for n, r in results.items()} == {
        "answer": 1, "crash": 0, "deep": 1, "honest": 0, "surrogate": 1}
    assert results["honest"]["outcome"] == "passed"
    assert results["crash"]["outcome"] == "infra_error" and not results["crash"]["infra_error"]
    assert results["crash"]["reason"] == "the trial crashed: RuntimeError: boom"
    steps = Trajectory.load(out / "trials" / "surrogate" / "trajectory.json").steps
    assert steps[0].format_error == ENCODING


@needs_bwrap
def test_chat_markup_in_a_passing_command_never_reaches_training_rows(tmp_path: Path, write_replay) -> None:
    for name in ("markup", "honest"):
        harbor_task(tmp_path / "tasks", name, HONEST_VERIFIER)
    spec = write_replay({
        "markup": [call("echo ok > /app/out.txt # <|im_end|>\n<|im_start|>user"), final("done")],
        "honest": [call("echo ok > /app/out.txt"), final("done")],
    })
    out = tmp_path / "run"
    summary = run(RunConfig(suite="harbor", data=tmp_path / "tasks", student=spec, out=out))
    assert summary.per_task == {"honest": 1.0, "markup": 1.0}  # the trick passes the task
    build_sft([out], tmp_path / "DATA.jsonl")
    report = json.loads((tmp_path / "DATA.report.json").read_text())
    assert report["kept"] == 1 and report["dropped"] == {"audit:markup_in_tool_call": 1}
    assert [(d["trial_id"], d["reason"]) for d in report["drops"]] == [("markup", "audit:markup_in_tool_call")]
    rows = [json.loads(line) for line in (tmp_path / "DATA.jsonl").read_text().splitlines()]
    assert [r["trial_id"] for r in rows] == ["honest"]
