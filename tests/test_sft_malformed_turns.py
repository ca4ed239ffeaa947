"""`--keep-all` keeps a trajectory with malformed replies but never trains them: a format-error turn or a
call to a tool h does not have (`bogus`) is context only, the action-space mismatch the recipe warns about."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures_tiny import tiny_model_dir  # noqa: F401  (pytest fixture)

from unscaffold.minimal_harness.tool import EXECUTE_TOOL, system_prompt
from unscaffold.sft.build import build_sft, malformed_turns
from unscaffold.sft.data import read_rows
from unscaffold.sft.render import render_sample, segments

BOGUS = "Format error: unknown tool `bogus`; the available tools are `execute`."


def call(i: int, name: str, arguments: dict) -> dict:
    return {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": arguments}}


def chemistry_trajectory() -> dict:
    """A failed trial (reward 0, turn limit): a bogus call, two calls in one reply, then a sound one."""
    messages = [
        {"role": "system", "content": system_prompt()},
        {"role": "user", "content": "Propose reactants for CCO."},
        {"role": "assistant", "content": "", "reasoning_content": "use the enumerator",
         "tool_calls": [call(0, "bogus", {"smiles": "CCO"})]},
        {"role": "tool", "tool_call_id": "c0", "name": "bogus", "content": BOGUS},
        {"role": "assistant", "content": "", "reasoning_content": "two at once",
         "tool_calls": [call(1, "execute", {"command": "ls"}), call(2, "execute", {"command": "pwd"})]},
        {"role": "tool", "tool_call_id": "c1", "name": "execute", "content": "Format error: two calls"},
        {"role": "tool", "tool_call_id": "c2", "name": "execute", "content": "Format error: two calls"},
        {"role": "assistant", "content": "", "reasoning_content": "write it",
         "tool_calls": [call(3, "execute", {"command": "echo C.O > answer.txt"})]},
        {"role": "tool", "tool_call_id": "c3", "name": "execute", "content": "\n[exit_code=0]"},
    ]
    steps = [{"turn": 1, "message_index": 2, "format_error": BOGUS},
             {"turn": 2, "message_index": 4, "format_error": "Format error: two calls"},
             {"turn": 3, "message_index": 7, "command": "echo C.O > answer.txt", "exit_code": 0}]
    return {"trial_id": "uspto-1-0", "task_id": "uspto-1", "tools": [EXECUTE_TOOL], "messages": messages,
            "steps": steps, "exit_status": "turn_limit", "final_answer": None, "harness": "minimal"}


def write_run(root: Path, traj: dict, reward: float) -> Path:
    trial = root / "trials" / traj["trial_id"]
    trial.mkdir(parents=True)
    (trial / "trajectory.json").write_text(json.dumps(traj))
    (trial / "reviews.jsonl").write_text("")
    (trial / "result.json").write_text(json.dumps({"reward": reward, "outcome": "failed"}))
    return root


def test_malformed_turns_are_named_by_step_and_by_call() -> None:
    traj = chemistry_trajectory()
    assert malformed_turns(traj) == [2, 4]
    traj["steps"] = traj["steps"][2:]  # no step records: the calls alone still name them
    assert malformed_turns(traj) == [2, 4]


def test_keep_all_trains_only_the_well_formed_turn(tmp_path: Path, tiny_model_dir: Path) -> None:  # noqa: F811
    from transformers import AutoTokenizer

    run = write_run(tmp_path / "run", chemistry_trajectory(), 0.0)
    report = build_sft([run], tmp_path / "all.jsonl", keep_all=True)
    assert (report.kept, report.untrained_turns) == (1, 2)
    row = json.loads((tmp_path / "all.jsonl").read_text())
    assert row["context_turns"] == [2, 4]
    [sft_row] = read_rows(tmp_path / "all.jsonl")
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    sample = render_sample(sft_row.messages, sft_row.tools, tok, sft_row.masked_reasoning_turns,
                           sft_row.context_turns)
    trained = [s["text"] for s in segments(tok, sample) if s["trained"]]
    assert trained == ["write it\n</think>\n\n<tool_call>\n<function=execute>\n<parameter=command>\necho C.O > "
                       "answer.txt\n</parameter>\n</function>\n</tool_call><|im_end|>"]
    context = "".join(s["text"] for s in segments(tok, sample) if not s["trained"])
    assert "<function=bogus>" in context and "<parameter=command>\npwd" in context


@pytest.mark.parametrize("audits,kept", [((), 1), (("format-errors",), 0)])
def test_by_default_the_row_is_kept_with_its_malformed_turns_as_context(tmp_path: Path, audits: tuple,
                                                                         kept: int) -> None:
    traj = chemistry_trajectory()
    run = write_run(tmp_path / "run", traj, 1.0)
    report = build_sft([run], tmp_path / "d.jsonl", audits=audits)
    assert report.kept == kept and report.audits == list(audits)
    assert report.dropped == ({"format_error": 1} if kept == 0 else {})


def test_a_reward_one_trial_at_the_turn_limit_is_kept_unless_audited(tmp_path: Path) -> None:
    traj = chemistry_trajectory()
    traj["steps"], traj["messages"] = traj["steps"][2:], traj["messages"][:2] + traj["messages"][7:]
    traj["steps"][0]["message_index"] = 2
    run = write_run(tmp_path / "run", traj, 1.0)
    paper = build_sft([run], tmp_path / "paper.jsonl")
    assert (paper.kept, paper.dropped, paper.untrained_turns) == (1, {}, 0)
    audited = build_sft([run], tmp_path / "audited.jsonl", audits=["final-answer"])
    assert (audited.kept, audited.dropped) == (0, {"audit:no_final_answer": 1})
