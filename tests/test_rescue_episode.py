"""A whole rescue rollout follows h: the same turn limit, multi-call and unknown-tool replies answered with
h's format errors, h's observations, and at every turn the context the model generates from is, token for
token, what `unscaffold run` renders at that turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.helpers import needs_bwrap
from unscaffold.benchmarks import load_suite
from unscaffold.cli import app

SUITE = "retrosynthesis"


def replies(answer: str) -> list[dict[str, Any]]:
    """The student's replies: two malformed ones, two commands (the second writes the task's answer), a finish."""
    return [
        {"tool_calls": [{"name": "execute", "arguments": {"command": "echo one"}},
                        {"name": "execute", "arguments": {"command": "echo two > two.txt"}}]},  # several calls
        {"tool_call": {"name": "python", "arguments": {"code": "print(1)"}}},  # a tool h does not have
        {"tool_call": {"name": "execute", "arguments": {"command": "echo hi > note.txt; cat note.txt"}}},
        {"tool_call": {"name": "execute", "arguments": {"command": answer}}},
        {"content": "done"},
    ]


def h_episode(tmp_path: Path, task_id: str, max_turns: int) -> tuple[list[Any], list[dict], float]:
    """The episode `unscaffold run` gives a student that makes these replies: messages, tools, reward."""
    from unscaffold.minimal_harness.trajectory import Trajectory

    replay = tmp_path / "replay.json"
    suite = load_suite(SUITE)
    task = next(t for t in suite.tasks("train") if t.id == task_id)
    replay.write_text(json.dumps({task_id: replies(" && ".join(suite.oracle_commands(task)))}))
    out = tmp_path / f"h-{max_turns}"
    result = CliRunner().invoke(app, ["run", SUITE, "--student", f"replay:{replay}", "--tasks", task_id,
                                      "--max-turns", str(max_turns), "--out", str(out)])
    assert result.exit_code == 0, result.output
    [trial] = list((out / "trials").iterdir())
    trajectory = Trajectory.load(trial / "trajectory.json")
    reward = json.loads((trial / "result.json").read_text())["reward"]
    return trajectory.messages, trajectory.tools, reward


@needs_bwrap
@pytest.mark.parametrize("max_turns,reward", [(40, 1.0), (4, 1.0), (3, 0.0)])
def test_rescue_rollout_is_h_token_for_token(max_turns: int, reward: float, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UNSCAFFOLD_CACHE", str(tmp_path / "cache"))
    from trl import GRPOTrainer

    from unscaffold.llm.chat_render import encode, render_chat
    from unscaffold.llm.hf_backend import HFModel
    from unscaffold.offline.tiny import resolve_model_path
    from unscaffold.rescue.environment import HarnessEnvironment

    task = load_suite(SUITE).tasks("train")[0]
    messages, tools, h_reward = h_episode(tmp_path, task.id, max_turns)
    assert h_reward == reward  # at 4 turns the fourth reply's answer is written (and run scores it), at 3 not
    deployed = HFModel("hf:tiny", resolve_model_path("tiny"))
    tokenizer = deployed.tokenizer
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    turns: dict[tuple[int, ...], tuple[int, list[int]]] = {}  # run's context at turn j -> (j, the reply's ids)
    for j, at in enumerate(i for i, m in enumerate(messages) if m.role == "assistant"):
        context = deployed.prompt_ids(messages[:at], tools)
        full = encode(tokenizer, render_chat(tokenizer, messages[:at + 1], tools, add_generation_prompt=False))
        assert full[:len(context)] == context
        reply = full[len(context):]
        turns[tuple(context)] = (j, reply[:reply.index(end) + 1])
    assert len(turns) == min(max_turns, 5)
    seen: list[int] = []

    def scripted(self: Any, prompt_ids: list[list[int]], *args: Any, **kwargs: Any) -> tuple[list[list[int]], None]:
        """The policy makes the episode's replies; a context run would not render gets no reply at all."""
        out = []
        for ids in prompt_ids:
            j, reply = turns.get(tuple(ids), (-1, [end]))
            seen.append(j)
            out.append(reply)
        return out, None

    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", scripted)
    rewards: list[float] = []
    original = HarnessEnvironment.get_reward

    def keep(self: HarnessEnvironment) -> float:
        rewards.append(original(self))
        return rewards[-1]

    monkeypatch.setattr(HarnessEnvironment, "get_reward", keep)
    out = tmp_path / "rescue"
    result = CliRunner().invoke(app, ["rescue", "train", SUITE, "--model", "tiny", "--router", "none",
                                      "--tasks", task.id, "--k", "2", "--tasks-per-step", "1",
                                      "--steps-per-generation", "1", "--max-steps", "1", "--max-turns",
                                      str(max_turns), "--max-completion-length", "4096", "--out", str(out)])
    assert result.exit_code == 0, result.output
    # both rollouts of the group: every turn's context was run's, in order, and no reply beyond the turn limit
    assert seen == [0, 0] + [j for j in range(1, min(max_turns, 5)) for _ in range(2)]
    assert rewards == [h_reward, h_reward]
