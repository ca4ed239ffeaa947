"""ATIF export: exact fields for a hand-built trajectory, strict models, and export over a run folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

import unscaffold
from unscaffold.errors import InputError
from unscaffold.llm.types import ChatToolCall, FunctionCall, Message, Usage
from unscaffold.minimal_harness.atif import AtifTrajectory, export_run, trajectory_to_atif
from unscaffold.minimal_harness.tool import EXECUTE_TOOL
from unscaffold.minimal_harness.trajectory import StepRecord, Trajectory
from unscaffold.run.folder import RunFolder

T0 = "2026-01-02T03:04:05.000+00:00"
T1 = "2026-01-02T03:04:06.000+00:00"
T2 = "2026-01-02T03:04:09.000+00:00"


def make_trajectory(trial_id: str = "trial-1") -> Trajectory:
    call = ChatToolCall(id="call_1", function=FunctionCall(name="execute", arguments={"command": "ls"}))
    return Trajectory(
        trial_id=trial_id,
        task_id="task-7",
        suite="demo",
        student="openai/gpt-test",
        tools=[EXECUTE_TOOL],
        messages=[
            Message(role="system", content="You are an agent."),
            Message(role="user", content="List the files."),
            Message(role="assistant", content="", reasoning_content="I should look.", tool_calls=[call]),
            Message(role="tool", tool_call_id="call_1", name="execute", content="a.txt\n\n[exit_code=0]"),
            Message(role="assistant", content="The folder holds a.txt."),
        ],
        steps=[
            StepRecord(
                turn=1,
                message_index=2,
                started_at=T1,
                model_s=1.5,
                exec_s=0.25,
                exit_code=0,
                usage=Usage(input_tokens=100, output_tokens=20, cost_usd=0.001),
            ),
            StepRecord(
                turn=2,
                message_index=4,
                started_at=T2,
                model_s=0.5,
                usage=Usage(input_tokens=150, output_tokens=10, cost_usd=0.002),
            ),
        ],
        exit_status="submitted",
        final_answer="The folder holds a.txt.",
        usage=Usage(input_tokens=250, output_tokens=30, cost_usd=0.003),
        started_at=T0,
        ended_at=T2,
        wall_s=4.0,
    )


def test_trajectory_to_atif_exact() -> None:
    doc = trajectory_to_atif(make_trajectory())
    assert doc["schema_version"] == "ATIF-v1.7"
    assert doc["session_id"] == "trial-1"
    assert doc["agent"] == {
        "name": "unscaffold-minimal",
        "version": unscaffold.__version__,
        "model_name": "openai/gpt-test",
        "tool_definitions": [EXECUTE_TOOL],
        "extra": {"harness": "minimal"},
    }
    steps = doc["steps"]
    assert len(steps) == 4
    assert [s["step_id"] for s in steps] == [1, 2, 3, 4]
    assert [s["source"] for s in steps] == ["system", "user", "agent", "agent"]
    assert steps[0] == {"step_id": 1, "timestamp": T0, "source": "system", "message": "You are an agent."}
    assert steps[1] == {"step_id": 2, "timestamp": T0, "source": "user", "message": "List the files."}
    assert steps[2] == {
        "step_id": 3,
        "timestamp": T1,
        "source": "agent",
        "message": "",
        "reasoning_content": "I should look.",
        "tool_calls": [{"tool_call_id": "call_1", "function_name": "execute", "arguments": {"command": "ls"}}],
        "observation": {"results": [{"source_call_id": "call_1", "content": "a.txt\n\n[exit_code=0]"}]},
        "metrics": {"prompt_tokens": 100, "completion_tokens": 20, "cost_usd": 0.001},
        "llm_call_count": 1,
        "extra": {"turn": 1, "model_s": 1.5, "exec_s": 0.25, "exit_code": 0},
    }
    assert steps[3] == {
        "step_id": 4,
        "timestamp": T2,
        "source": "agent",
        "message": "The folder holds a.txt.",
        "metrics": {"prompt_tokens": 150, "completion_tokens": 10, "cost_usd": 0.002},
        "llm_call_count": 1,
        "extra": {"turn": 2, "model_s": 0.5},
    }
    assert doc["final_metrics"] == {
        "total_prompt_tokens": 250,
        "total_completion_tokens": 30,
        "total_cost_usd": pytest.approx(0.003),
        "total_steps": 4,
    }
    assert doc["extra"] == {
        "task_id": "task-7",
        "suite": "demo",
        "exit_status": "submitted",
        "final_answer": "The folder holds a.txt.",
        "started_at": T0,
        "ended_at": T2,
        "wall_s": 4.0,
    }
    json.dumps(doc)  # plain JSON all the way down


def test_malformed_arguments_and_format_errors() -> None:
    traj = make_trajectory()
    bad = ChatToolCall(id="c9", function=FunctionCall(name="execute", arguments="{not json"))
    traj.messages[2:] = [
        Message(role="assistant", content="", tool_calls=[bad]),
        Message(role="tool", tool_call_id="c9", name="execute", content="Format error: not a JSON object."),
    ]
    traj.steps = [StepRecord(turn=1, message_index=2, started_at=T1, format_error="Format error: x")]
    doc = trajectory_to_atif(traj)
    step = doc["steps"][2]
    assert step["tool_calls"] == [
        {"tool_call_id": "c9", "function_name": "execute", "arguments": {}, "extra": {"raw_arguments": "{not json"}}
    ]
    assert step["observation"]["results"][0]["source_call_id"] == "c9"
    assert step["extra"]["format_error"] == "Format error: x"
    assert doc["final_metrics"]["total_steps"] == 3


def test_reused_call_ids_attach_to_the_latest_step() -> None:
    traj = make_trajectory()
    again = ChatToolCall(id="call_1", function=FunctionCall(name="execute", arguments={"command": "pwd"}))
    traj.messages[4:] = [
        Message(role="assistant", content="", tool_calls=[again]),
        Message(role="tool", tool_call_id="call_1", name="execute", content="/app\n\n[exit_code=0]"),
    ]
    doc = trajectory_to_atif(traj)
    assert doc["steps"][2]["observation"]["results"][0]["content"].startswith("a.txt")
    assert doc["steps"][3]["observation"]["results"] == [
        {"source_call_id": "call_1", "content": "/app\n\n[exit_code=0]"}
    ]


def test_models_are_strict() -> None:
    doc = trajectory_to_atif(make_trajectory())
    with pytest.raises(ValidationError):
        AtifTrajectory.model_validate({**doc, "surprise": 1})
    bad = json.loads(json.dumps(doc))
    bad["steps"][2]["observation"]["results"][0]["source_call_id"] = "nope"
    with pytest.raises(ValidationError, match="matches no tool call"):
        AtifTrajectory.model_validate(bad)
    bad = json.loads(json.dumps(doc))
    bad["steps"][1]["metrics"] = {"prompt_tokens": 1}
    with pytest.raises(ValidationError, match="only allowed on agent steps"):
        AtifTrajectory.model_validate(bad)
    bad = json.loads(json.dumps(doc))
    bad["steps"][3]["step_id"] = 7
    with pytest.raises(ValidationError, match="step ids run"):
        AtifTrajectory.model_validate(bad)


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    for trial_id in ("t-b", "t-a"):
        make_trajectory(trial_id).save(run / "trials" / trial_id / "trajectory.json")
    return run


def test_export_run_next_to_trajectories(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    empty = Trajectory(trial_id="t-c", task_id="x", suite="demo", student="s", tools=[])
    empty.save(run / "trials" / "t-c" / "trajectory.json")  # failed before the first prompt: skipped
    paths = export_run(RunFolder(run))
    assert paths == [
        run / "trials" / "t-a" / "trajectory.atif.json",
        run / "trials" / "t-b" / "trajectory.atif.json",
    ]
    doc = json.loads(paths[0].read_text())
    assert doc["session_id"] == "t-a" and len(doc["steps"]) == 4
    AtifTrajectory.model_validate(doc)
    assert not list(run.rglob(".*.tmp"))  # atomic writes leave no temporaries


def test_export_run_into_out_dir(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    out = tmp_path / "atif"
    paths = export_run(RunFolder(run), out)
    assert paths == [out / "t-a.atif.json", out / "t-b.atif.json"]
    assert json.loads(paths[1].read_text())["session_id"] == "t-b"
    assert not (run / "trials" / "t-a" / "trajectory.atif.json").exists()


def test_export_run_malformed_file_names_it(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    broken = run / "trials" / "t-z" / "trajectory.json"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"trial_id": "t-z", "messages": [}')
    with pytest.raises(InputError) as info:
        export_run(RunFolder(run))
    assert str(broken) in str(info.value)
    wrong = json.loads((run / "trials" / "t-a" / "trajectory.json").read_text())
    del wrong["tools"]
    broken.write_text(json.dumps(wrong))
    with pytest.raises(InputError, match="tools"):
        export_run(RunFolder(run))


def test_export_run_needs_a_run_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no trials/ folder"):
        export_run(RunFolder(tmp_path))


def test_oracle_steps_call_no_model() -> None:
    traj = make_trajectory()
    traj.student = "oracle"
    doc = trajectory_to_atif(traj)
    assert [s.get("llm_call_count") for s in doc["steps"]] == [None, None, 0, 0]
    assert [s.get("llm_call_count") for s in trajectory_to_atif(make_trajectory())["steps"]] == [None, None, 1, 1]
