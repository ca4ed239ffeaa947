"""A suite's worked-example opening: kept token for token as context, never trained, never the student's."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from fixtures_qwen import TOKENIZERS, model_dir, qwen_bpe_qwen3_dir, qwen_bpe_think_dir  # noqa: F401  (fixtures)
from fixtures_tiny import tiny_model_dir, tiny_qwen3_dir  # noqa: F401  (pytest fixtures)
from sft_rows import TOOLS, call, write_rows
from typer.testing import CliRunner

from tests.helpers import needs_bwrap, trained_runs
from unscaffold.cli import app
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run
from unscaffold.sft.build import build_sft
from unscaffold.sft.data import SFTRow, prepare, read_rows
from unscaffold.sft.render import render_sample, render_turns, segments

CALL_CAT = ("<tool_call>\n<function=execute>\n<parameter=command>\ncat a.txt\n</parameter>\n</function>\n"
            "</tool_call><|im_end|>")
JSON_CAT = '<tool_call>\n{"name": "execute", "arguments": {"command": "cat a.txt"}}\n</tool_call><|im_end|>'
TRAINED = {"qwen3_5_think": ["look\n</think>\n\n" + CALL_CAT, "I can answer.\n</think>\n\nDone.<|im_end|>"],
           "qwen3": ["<think>\nlook\n</think>\n\n" + JSON_CAT, "<think>\nI can answer.\n</think>\n\nDone.<|im_end|>"]}
LITE_TASK = "settle_requests-0_1"  # an appworld_lite task the oracle solves in three turns


@functools.lru_cache(maxsize=8)
def tokenizer(path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def opening_row() -> dict[str, Any]:
    """A worked example (turn 2) before the task, then two student turns."""
    messages = [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "Example: list the files."},
        {"role": "assistant", "content": "I list the files first.", "tool_calls": [call("ls", 0)]},
        {"role": "tool", "tool_call_id": "call_0", "name": "execute", "content": "a.txt\n[exit_code=0]"},
        {"role": "user", "content": "Now the real task: show a.txt."},
        {"role": "assistant", "content": "", "reasoning_content": "look", "tool_calls": [call("cat a.txt", 1)]},
        {"role": "tool", "tool_call_id": "call_1", "name": "execute", "content": "hi\n[exit_code=0]"},
        {"role": "assistant", "content": "Done.", "reasoning_content": "I can answer."},
    ]
    return {"messages": messages, "tools": TOOLS, "masked_reasoning_turns": [], "context_turns": [2]}


def prompt_len(tok: Any, messages: list[dict[str, Any]], k: int) -> int:
    text = tok.apply_chat_template(messages[:k], tools=TOOLS, add_generation_prompt=True, tokenize=False)
    return len(tok(text, add_special_tokens=False)["input_ids"])


@pytest.mark.parametrize("kind", TOKENIZERS)
@pytest.mark.parametrize("family", ["qwen3_5_think", "qwen3"])
def test_context_turns_carry_no_loss_and_student_spans_are_exact(kind: str, family: str,
                                                                 request: pytest.FixtureRequest) -> None:
    tok = tokenizer(model_dir(request, kind, family))
    row = SFTRow.model_validate(opening_row())
    sample = render_sample(row.messages, row.tools, tok, row.masked_reasoning_turns, row.context_turns)
    segs = segments(tok, sample)
    assert [s["trained"] for s in segs] == [False, True, False, True, False]
    assert [s["text"] for s in segs if s["trained"]] == TRAINED[family]
    assert "I list the files first." in segs[0]["text"]  # the worked example is in the context
    end = tok.convert_tokens_to_ids("<|im_end|>")
    runs = trained_runs(sample.completion_mask)
    raw = opening_row()["messages"]
    student_starts = [prompt_len(tok, raw, 5), prompt_len(tok, raw, 7)]
    assert [a for a, _ in runs] == student_starts  # each run starts right after its generation prompt
    assert [sample.input_ids[b - 1] for _, b in runs] == [end, end]
    # turn by turn: one sample per student turn, none for the worked example
    turns = render_turns(row.messages, row.tools, tok, row.masked_reasoning_turns, row.context_turns)
    assert [[s["text"] for s in segments(tok, t) if s["trained"]] for t in turns] == [[t] for t in TRAINED[family]]
    # read without the field (as plain TRL reads the row), the worked example is trained as well
    plain = render_turns(row.messages, row.tools, tok)
    assert len(plain) == 3 and [p.input_ids for p in plain[1:]] == [t.input_ids for t in turns]
    assert "I list the files first." in "".join(s["text"] for s in segments(tok, plain[0]) if s["trained"])


def test_context_turns_must_be_assistant_turns(tmp_path: Path) -> None:
    from unscaffold.errors import InputError

    path = write_rows(tmp_path / "rows.jsonl", [{**opening_row(), "context_turns": [3]}])
    with pytest.raises(InputError) as err:
        read_rows(path)
    assert str(err.value) == f"{path}: line 1: context_turns: 3 is not the index of an assistant message"


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("opening") / "run"
    summary = run(RunConfig(suite="appworld_lite", student="oracle", task_ids=[LITE_TASK], opening="demonstration",
                            out=out))
    assert summary.per_task == {LITE_TASK: 1.0}
    return out


@needs_bwrap
def test_build_sft_keeps_the_opening_as_context_turns(demo_run: Path, tmp_path: Path) -> None:
    traj = json.loads((demo_run / "trials" / LITE_TASK / "trajectory.json").read_text())
    assert traj["opening_messages"] == 24
    report = build_sft([demo_run], tmp_path / "data.jsonl")
    assert (report.kept, report.dropped) == (1, {})
    row = json.loads((tmp_path / "data.jsonl").read_text())
    assert row["context_turns"] == [2, 4, 6, 8, 10, 12, 14, 16, 18, 20]
    assert row["masked_reasoning_turns"] == [] and row["replacements"] == 0
    keep = ("role", "content", "reasoning_content", "tool_calls", "tool_call_id", "name")
    assert row["messages"] == [{k: m[k] for k in keep if m.get(k) is not None} for m in traj["messages"]]
    assert [i for i, m in enumerate(row["messages"]) if m["role"] == "assistant"][10:] == [24, 26, 28]


@needs_bwrap
@pytest.mark.parametrize("kind", TOKENIZERS)
def test_collected_opening_trains_only_the_student_turns(demo_run: Path, tmp_path: Path, kind: str,
                                                         request: pytest.FixtureRequest) -> None:
    tok = tokenizer(model_dir(request, kind, "qwen3_5_think"))
    build_sft([demo_run], tmp_path / "data.jsonl")
    (row,) = read_rows(tmp_path / "data.jsonl")
    prepared = prepare([row], tok, max_length=100_000, split_turns=False)  # what train-sft trains on
    raw = json.loads((tmp_path / "data.jsonl").read_text())["messages"]
    end = tok.convert_tokens_to_ids("<|im_end|>")
    starts = [prompt_len(tok, raw, k) for k in (24, 26, 28)]
    assert prepared.dropped == []
    if kind == "tiny":  # one sequence, three trained runs
        assert prepared.rows_split == [] and len(prepared.samples) == 1
        runs = [(prepared.samples[0], run) for run in trained_runs(prepared.samples[0].completion_mask)]
    else:  # the real BPE merges `\n\n` after an empty reasoning: the row trains turn by turn, still 3 samples
        assert prepared.rows_split == [0] and len(prepared.samples) == 3
        runs = [(s, run) for s in prepared.samples for run in trained_runs(s.completion_mask)]
    assert [a for _, (a, _) in runs] == starts
    assert [s.input_ids[b - 1] for s, (_, b) in runs] == [end, end, end]
    trained = [t["text"] for s in prepared.samples for t in segments(tok, s) if t["trained"]]
    assert len(trained) == 3
    assert trained[-1].endswith("\n</think>\n\nReference solution applied.<|im_end|>")
    assert not any("demo_" in t or "show_notes" in t for t in trained)


@needs_bwrap
def test_inspect_sft_shows_the_worked_example_untrained(demo_run: Path, tmp_path: Path,
                                                        request: pytest.FixtureRequest) -> None:
    build_sft([demo_run], tmp_path / "data.jsonl")
    tiny = model_dir(request, "tiny", "qwen3_5_think")
    result = CliRunner().invoke(app, ["inspect-sft", str(tmp_path / "data.jsonl"), "--model", str(tiny), "--json"])
    assert result.exit_code == 0, result.output
    segs = json.loads(result.output)
    assert [s["trained"] for s in segs] == [False, True, False, True, False, True, False]
    assert "apis.notes.show_notes(access_token=token, page_index=page)" in segs[0]["text"]
    assert segs[5]["text"] == "\n</think>\n\nReference solution applied.<|im_end|>"


@needs_bwrap
def test_the_opening_is_not_the_students_for_the_scrub_and_the_audit(demo_run: Path, tmp_path: Path) -> None:
    # a marker only the worked example holds (its mocked password) leaves the row in; one of the student's drops it
    traj = json.loads((demo_run / "trials" / LITE_TASK / "trajectory.json").read_text())
    assert "demo-notes-pass" in json.dumps(traj["messages"][:24])
    kept = build_sft([demo_run], tmp_path / "kept.jsonl", canaries=["demo-notes-pass"])
    assert (kept.kept, kept.dropped) == (1, {})
    student_text = traj["messages"][-1]["content"]
    dropped = build_sft([demo_run], tmp_path / "dropped.jsonl", canaries=["Reference"])
    assert dropped.dropped == {"leak:canary": 1} and student_text == "Reference solution applied."
    assert dropped.drops[0].context == '"role":"assistant","content":"<canary> solution applied."}],"tools":'
    # a step record pointing into the worked example is refused by the audit
    forged = tmp_path / "forged"
    (forged / "trials").mkdir(parents=True)
    trial = forged / "trials" / LITE_TASK
    trial.mkdir()
    for name in ("result.json", "reviews.jsonl"):
        (trial / name).write_bytes((demo_run / "trials" / LITE_TASK / name).read_bytes())
    traj["steps"][0]["message_index"] = 2
    traj["steps"][0].pop("command", None)
    (trial / "trajectory.json").write_text(json.dumps(traj))
    (trial / "reviews.jsonl").write_text("")
    report = build_sft([forged], tmp_path / "forged.jsonl")
    assert report.dropped == {"audit:step_in_opening": 1}
