"""The loop of h: limits, format errors, final answers, and what a review hook changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import call, eventually, final
from unscaffold.llm.registry import load_provider
from unscaffold.llm.types import AssistantResponse, Message, ToolCall, Usage
from unscaffold.minimal_harness.agent import Agent, AgentConfig
from unscaffold.minimal_harness.sandbox import SandboxConfig
from unscaffold.minimal_harness.sandbox.none import UnisolatedSandbox
from unscaffold.minimal_harness.tool import EXECUTE_TOOL, format_problem
from unscaffold.minimal_harness.trajectory import Trajectory


def make_agent(tmp_path: Path, spec: str, **config) -> Agent:
    model = load_provider(spec).for_trial("t1")
    sandbox = UnisolatedSandbox(SandboxConfig(kind="none", workspace=tmp_path / "ws"))
    traj = Trajectory(trial_id="t1", task_id="t1", suite="unit", student=spec, tools=[])
    return Agent(model, sandbox, traj, config=AgentConfig(**config), save_path=tmp_path / "trajectory.json")


def test_final_answer_ends_the_episode(tmp_path: Path, write_replay) -> None:
    spec = write_replay({"t1": [call("echo hi"), final("done: hi")]})
    traj = make_agent(tmp_path, spec).run("say hi")
    assert traj.exit_status == "submitted"
    assert traj.final_answer == "done: hi"
    assert [m.role for m in traj.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert traj.messages[0].content.startswith("You are an autonomous agent")
    assert traj.messages[3].content == "hi\n\n[exit_code=0]"
    assert traj.messages[3].tool_call_id == traj.messages[2].tool_calls[0].id
    assert traj.tools == [EXECUTE_TOOL]
    saved = Trajectory.load(tmp_path / "trajectory.json")
    assert saved.messages == traj.messages and saved.exit_status == "submitted"


def test_turn_limit(tmp_path: Path, write_replay) -> None:
    spec = write_replay({"*": [call(f"echo {i}") for i in range(10)]})
    traj = make_agent(tmp_path, spec, max_turns=3).run("loop")
    assert traj.exit_status == "turn_limit"
    assert len(traj.steps) == 3
    assert traj.final_answer is None
    assert [m.role for m in traj.messages].count("tool") == 3


def test_three_format_errors_in_a_row_end_the_episode(tmp_path: Path, write_replay) -> None:
    bad = [
        {"tool_call": {"name": "execute", "arguments": {"command": "   "}}},
        {"tool_call": {"name": "str_replace", "arguments": {"path": "x"}}},
        {"tool_calls": [{"name": "execute", "arguments": {"command": "ls"}},
                        {"name": "execute", "arguments": {"command": "pwd"}}]},
        final("never reached"),
    ]
    traj = make_agent(tmp_path, write_replay({"t1": bad})).run("x")
    assert traj.exit_status == "format_errors"
    assert [s.format_error for s in traj.steps] == [
        "Format error: `execute` needs one non-empty string argument `command`.",
        "Format error: unknown tool `str_replace`; the available tools are `execute`.",
        "Format error: make exactly one tool call per reply (got 2).",
    ]
    tool_msgs = [m for m in traj.messages if m.role == "tool"]
    assert len(tool_msgs) == 4  # both calls of the double call are answered
    assert tool_msgs[0].content == traj.steps[0].format_error


def test_format_error_counter_resets_after_a_good_call(tmp_path: Path, write_replay) -> None:
    empty = {"tool_call": {"name": "execute", "arguments": {"command": ""}}}
    spec = write_replay({"t1": [empty, empty, call("true"), empty, empty, final("ok")]})
    traj = make_agent(tmp_path, spec).run("x")
    assert traj.exit_status == "submitted"
    assert sum(1 for s in traj.steps if s.format_error) == 4


def test_malformed_json_arguments_are_a_format_error(tmp_path: Path, write_replay) -> None:
    spec = write_replay({"t1": [{"tool_call": {"name": "execute", "arguments": "{\"command\": \"ls"}}, final("x")]})
    traj = make_agent(tmp_path, spec).run("x")
    assert traj.steps[0].format_error == "Format error: the tool arguments are not a JSON object."
    assert traj.messages[2].tool_calls[0].function.arguments == "{\"command\": \"ls"


def test_review_hook_replacement_is_what_runs_and_is_recorded(tmp_path: Path, write_replay) -> None:
    spec = write_replay({"t1": [call("echo proposal > f.txt"), final("done")]})
    seen: list[tuple[int, str]] = []

    def hook(transcript: list[Message], proposal: AssistantResponse) -> AssistantResponse:
        seen.append((len(transcript), proposal.content or ""))
        if proposal.tool_calls:
            return AssistantResponse(
                reasoning="Write the replacement instead.",
                tool_calls=[ToolCall(id="r1", name="execute", arguments={"command": "echo replaced > f.txt"})],
            )
        return proposal

    agent = make_agent(tmp_path, spec)
    agent.review_hook = hook
    traj = agent.run("write f")
    assert (tmp_path / "ws" / "f.txt").read_text() == "replaced\n"
    assert traj.messages[2].tool_calls[0].function.arguments == {"command": "echo replaced > f.txt"}
    assert traj.messages[2].reasoning_content == "Write the replacement instead."
    assert "proposal" not in traj.model_dump_json()
    assert [s.replaced for s in traj.steps] == [True, False]
    assert seen == [(2, ""), (4, "done")]


class Costly:
    """A backend that reports each reply's cost itself (0.004 USD)."""

    spec = "costly"

    def complete(self, messages: list[Message], tools: list) -> AssistantResponse:
        return AssistantResponse(usage=Usage(input_tokens=10, output_tokens=5, cost_usd=0.004),
                                 tool_calls=[ToolCall(id="c", name="execute", arguments={"command": "true"})])


def test_wall_and_cost_limits(tmp_path: Path, write_replay) -> None:
    spec = write_replay({"*": [call("sleep 0.3")] * 5})
    traj = make_agent(tmp_path, spec, max_wall_s=0.5).run("x")
    assert traj.exit_status == "wall_limit"
    assert traj.exit_message == "reached the wall-time limit of 0.5 s"
    assert 1 <= len(traj.steps) <= 2
    sandbox = UnisolatedSandbox(SandboxConfig(kind="none", workspace=tmp_path / "ws2"))
    traj = Trajectory(trial_id="t", task_id="t", suite="unit", student="costly", tools=[])
    Agent(Costly(), sandbox, traj, config=AgentConfig(max_cost_usd=0.01, price_in_per_mtok=1e6)).run("x")
    assert traj.exit_status == "cost_limit"
    assert traj.exit_message == "reached the cost limit of $0.01"
    assert len(traj.steps) == 3  # 0.004 USD a step, as the backend reported (the prices do not override it)
    assert traj.usage.cost_usd == pytest.approx(0.012)


def test_replay_exhausted_is_recorded_not_raised(tmp_path: Path, write_replay) -> None:
    spec = write_replay({"t1": [call("true")]})
    traj = make_agent(tmp_path, spec).run("x")
    assert traj.exit_status == "error"
    assert traj.exception.startswith("ReplayExhausted: ")
    assert "has no entry left after 1" in traj.exception


@pytest.mark.parametrize(
    "args,problem",
    [
        ({"command": "ls", "timeout": 5}, "Format error: `execute` takes only `command` (got also timeout)."),
        ({"command": 3}, "Format error: `execute` needs one non-empty string argument `command`."),
        ({"command": "ls"}, None),
    ],
)
def test_format_problem(args, problem) -> None:
    response = AssistantResponse(tool_calls=[ToolCall(id="c", name="execute", arguments=args)])
    assert format_problem(response) == problem


def test_cost_limit_with_prices(tmp_path: Path) -> None:
    from unscaffold.llm.types import Usage

    class Priced:
        spec = "priced"

        def complete(self, messages, tools):
            return AssistantResponse(usage=Usage(input_tokens=1000, output_tokens=500),
                                     tool_calls=[ToolCall(id="c", name="execute", arguments={"command": "true"})])

    sandbox = UnisolatedSandbox(SandboxConfig(kind="none", workspace=tmp_path / "ws"))
    traj = Trajectory(trial_id="t", task_id="t", suite="unit", student="priced", tools=[])
    config = AgentConfig(max_cost_usd=0.01, price_in_per_mtok=3.0, price_out_per_mtok=6.0)
    Agent(Priced(), sandbox, traj, config=config).run("x")
    assert traj.exit_status == "cost_limit"
    assert len(traj.steps) == 2  # 0.006 USD a step: the limit is reached after the second
    assert traj.usage.cost_usd == pytest.approx(0.012)


def test_trajectory_writer_ends_with_the_last_snapshot(tmp_path: Path) -> None:
    from unscaffold.minimal_harness.trajectory import TrajectoryWriter

    traj = Trajectory(trial_id="t", task_id="t", suite="unit", student="s", tools=[])
    writer = TrajectoryWriter(tmp_path / "trajectory.json")
    for i in range(200):
        traj.messages.append(Message(role="user", content=str(i)))
        writer.submit(traj)
    writer.close()
    saved = Trajectory.load(tmp_path / "trajectory.json")
    assert [m.content for m in saved.messages] == [str(i) for i in range(200)]
    assert not list(tmp_path.glob("*.tmp"))


def test_trajectory_writer_surfaces_write_errors(tmp_path: Path) -> None:
    from unscaffold.minimal_harness.trajectory import TrajectoryWriter

    (tmp_path / "blocked").write_text("a file where a folder should be")
    writer = TrajectoryWriter(tmp_path / "blocked" / "trajectory.json")
    writer.submit(Trajectory(trial_id="t", task_id="t", suite="unit", student="s", tools=[]))
    with pytest.raises(NotADirectoryError):
        writer.close()


def test_trajectory_writer_writes_at_most_once_an_interval_and_last_on_close(tmp_path: Path, monkeypatch) -> None:
    from unscaffold.minimal_harness.trajectory import TrajectoryWriter

    written: list[int] = []
    save = Trajectory.save
    monkeypatch.setattr(Trajectory, "save", lambda self, path: (written.append(len(self.messages)), save(self, path)))
    monkeypatch.setattr(TrajectoryWriter, "interval_s", 60.0)
    traj = Trajectory(trial_id="t", task_id="t", suite="unit", student="s", tools=[])
    writer = TrajectoryWriter(tmp_path / "trajectory.json")
    traj.messages.append(Message(role="user", content="0"))
    writer.submit(traj)
    assert eventually(lambda: written == [1])  # the first snapshot is written at once
    for i in range(1, 50):
        traj.messages.append(Message(role="user", content=str(i)))
        writer.submit(traj)
    writer.close()
    assert written == [1, 50]
    assert len(Trajectory.load(tmp_path / "trajectory.json").messages) == 50
