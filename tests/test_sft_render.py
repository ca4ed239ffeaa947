"""Loss masks: exact trained spans, the prefix property, and hf: generation prompts equal to training prefixes."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from fixtures_qwen import TOKENIZERS, model_dir, qwen_bpe_qwen3_dir, qwen_bpe_think_dir  # noqa: F401  (fixtures)
from fixtures_tiny import tiny_model_dir, tiny_qwen3_dir  # noqa: F401  (pytest fixtures)
from sft_rows import TOOLS, prompt_completion_format, reviewed_row, trl_format, two_queries_row, write_rows

from tests.helpers import trained_runs
from unscaffold.errors import InputError
from unscaffold.llm.hf_backend import HFModel
from unscaffold.llm.types import Message
from unscaffold.sft.data import SFTRow, prepare, read_rows
from unscaffold.sft.render import (
    PrefixPropertyError,
    assistant_turns,
    render_sample,
    render_turns,
    render_with_masks,
    segments,
)

CALL_LS = "<tool_call>\n<function=execute>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call><|im_end|>"
CALL_CAT = ("<tool_call>\n<function=execute>\n<parameter=command>\ncat a.txt\n</parameter>\n</function>\n"
            "</tool_call><|im_end|>")
JSON_LS = '<tool_call>\n{"name": "execute", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>'
JSON_CAT = '<tool_call>\n{"name": "execute", "arguments": {"command": "cat a.txt"}}\n</tool_call><|im_end|>'


@functools.lru_cache(maxsize=8)
def tokenizer(path: Path) -> Any:
    """Loaded once per folder: the Qwen BPE's 151,669-token vocabulary takes seconds to load."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def messages(row: dict[str, Any]) -> list[Message]:
    return [Message.model_validate(m) for m in row["messages"]]


@pytest.mark.parametrize("kind", TOKENIZERS)
def test_qwen3_5_trained_spans_are_exact(kind: str, request: pytest.FixtureRequest) -> None:
    tok = tokenizer(model_dir(request, kind, "qwen3_5_think"))
    row = reviewed_row()
    sample = render_sample(messages(row), TOOLS, tok, row["masked_reasoning_turns"])
    segs = segments(tok, sample)
    assert [s["trained"] for s in segs] == [False, True, False, True, False, True, False]
    # student turn: reasoning, tool call and end-of-turn trained; the header with <think> is the prompt's
    assert segs[0]["text"].endswith("<|im_start|>user\nDo it.<|im_end|>\n<|im_start|>assistant\n<think>\n")
    assert segs[1]["text"] == "look\n</think>\n\n" + CALL_LS
    # tool output never; the reviewer-voice reasoning of turn 4 stays in the context, untrained
    assert segs[2]["text"] == ("\n<|im_start|>user\n<tool_response>\na.txt\n[exit_code=0]\n</tool_response><|im_end|>\n"
                               "<|im_start|>assistant\n<think>\nThe student proposal skipped a check.\n</think>")
    assert segs[3]["text"] == "\n\n" + CALL_CAT  # the replaced turn's call is trained
    assert segs[4]["text"] == ("\n<|im_start|>user\n<tool_response>\nhi\n[exit_code=0]\n</tool_response><|im_end|>\n"
                               "<|im_start|>assistant\n<think>\n")
    assert segs[5]["text"] == "I can answer.\n</think>\n\nDone.<|im_end|>"  # replaced final answer, reasoning kept
    assert segs[6]["text"] == "\n"  # the newline after end-of-turn is template glue, not generated
    # exact positions: each run ends on the end-of-turn token and starts right after the generation prompt
    end = tok.convert_tokens_to_ids("<|im_end|>")
    runs = trained_runs(sample.completion_mask)
    assert [sample.input_ids[b - 1] for _, b in runs] == [end, end, end]
    starts = []
    for k in assistant_turns(messages(row)):
        prompt = tok.apply_chat_template(row["messages"][:k], tools=TOOLS, add_generation_prompt=True, tokenize=False)
        starts.append(len(tok(prompt, add_special_tokens=False)["input_ids"]))
    think_close = sample.input_ids.index(tok.convert_tokens_to_ids("</think>"), starts[1])
    assert [a for a, _ in runs] == [starts[0], think_close + 1, starts[2]]
    assert sum(sample.completion_mask) == sum(b - a for a, b in runs)


@pytest.mark.parametrize("kind", TOKENIZERS)
def test_qwen3_trained_spans_are_exact(kind: str, request: pytest.FixtureRequest) -> None:
    tok = tokenizer(model_dir(request, kind, "qwen3"))
    row = reviewed_row()
    ids, mask = render_with_masks(messages(row), TOOLS, tok, row["masked_reasoning_turns"])
    from unscaffold.sft.render import Sample

    segs = segments(tok, Sample(ids, mask))
    assert [s["trained"] for s in segs] == [False, True, False, True, False, True, False]
    assert segs[0]["text"].endswith("<|im_start|>user\nDo it.<|im_end|>\n<|im_start|>assistant\n")
    assert segs[1]["text"] == "<think>\nlook\n</think>\n\n" + JSON_LS
    assert segs[2]["text"].endswith("<|im_start|>assistant\n<think>\nThe student proposal skipped a check.\n</think>")
    assert "<tool_response>\na.txt\n[exit_code=0]\n</tool_response>" in segs[2]["text"]
    assert segs[3]["text"] == "\n\n" + JSON_CAT
    assert segs[5]["text"] == "<think>\nI can answer.\n</think>\n\nDone.<|im_end|>"


def served_prompt_ids(tok: Any, wire: list[dict[str, Any]]) -> list[int]:
    """What an OpenAI-compatible server (vLLM, SGLang) feeds a model for a request's messages: arguments sent as
    JSON text are decoded for the template, which is applied with the request's tools and a generation prompt."""
    import json

    rows = []
    for row in wire:
        calls = [{**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
                 for c in row.get("tool_calls") or []]
        rows.append({**row, "tool_calls": calls} if calls else row)
    text = tok.apply_chat_template(rows, tools=TOOLS, add_generation_prompt=True, tokenize=False)
    return tok(text, add_special_tokens=False)["input_ids"]


def reasoning_less_row() -> dict[str, Any]:
    """The reviewed row with its first turn replaced by one that carries no reasoning."""
    row = reviewed_row()
    row["messages"][2].pop("reasoning_content")
    return row


@pytest.mark.parametrize("kind", TOKENIZERS)
@pytest.mark.parametrize("family", ["qwen3_5_think", "qwen3"])
@pytest.mark.parametrize("make_row", [reviewed_row, reasoning_less_row])
def test_deployment_prompts_are_the_training_prefix(family: str, kind: str, make_row: Any,
                                                    request: pytest.FixtureRequest) -> None:
    """For every turn, the ids before its trained span are token for token what `hf:` generation and an
    OpenAI-compatible server fed the wire messages of the `openai:` backend give the model."""
    from unscaffold.llm.openai_backend import OpenAIModel
    from unscaffold.sft.render import render_row

    path = model_dir(request, kind, family)
    tok = tokenizer(path)
    hf = HFModel(f"hf:{path}", str(path), device="cpu")
    served = OpenAIModel("openai:served", "served", base_url="http://127.0.0.1:1/v1")
    msgs = messages(make_row())
    samples, _ = render_row(msgs, TOOLS, tok)  # no masked reasoning: each run starts at its generation prompt
    starts = [(sample, start) for sample in samples for start, _ in trained_runs(sample.completion_mask)]
    for (sample, start), k in zip(starts, assistant_turns(msgs), strict=True):
        prefix = sample.input_ids[:start]
        assert prefix == hf.prompt_ids(msgs[:k], TOOLS)
        assert prefix == served_prompt_ids(tok, served.wire_messages(msgs[:k]))
    for sample_k, k in zip(render_turns(msgs, TOOLS, tok), assistant_turns(msgs), strict=True):
        prompt = hf.prompt_ids(msgs[:k], TOOLS)
        assert sample_k.input_ids[: len(prompt)] == prompt
        assert sample_k.completion_mask == [0] * len(prompt) + [1] * (len(sample_k.input_ids) - len(prompt))
    # OpenAI's own API keeps reasoning server-side: sent that way, a served Qwen would see another context
    bare = OpenAIModel("openai:own", "own", api_key="k", send_reasoning=False)
    last = assistant_turns(msgs)[-1]
    assert served_prompt_ids(tok, bare.wire_messages(msgs[:last])) != hf.prompt_ids(msgs[:last], TOOLS)


@pytest.mark.parametrize("kind", TOKENIZERS)
def test_prefix_property_break_names_the_turn_and_split_turns_fixes_it(kind: str,
                                                                      request: pytest.FixtureRequest) -> None:
    tok = tokenizer(model_dir(request, kind, "qwen3_5_think"))
    msgs = messages(two_queries_row())
    with pytest.raises(PrefixPropertyError) as err:
        render_with_masks(msgs, TOOLS, tok)
    assert err.value.turn == 1
    assert str(err.value) == ("turn 1: the generation prompt is not a text prefix of the full rendering (the template "
                              "renders earlier turns differently once later messages exist)")
    samples = render_turns(msgs, TOOLS, tok)
    trained = [[s["text"] for s in segments(tok, x) if s["trained"]] for x in samples]
    assert trained == [["R0\n</think>\n\n" + CALL_LS], ["R1\n</think>\n\nOne.<|im_end|>"],
                       ["R2\n</think>\n\nTwo.<|im_end|>"]]
    # without --split-turns such a row is dropped and counted, with its turn
    prepared = prepare([SFTRow.model_validate(two_queries_row())], tok, max_length=10_000, split_turns=False)
    assert prepared.samples == [] and prepared.dropped_by_reason() == {"prefix_property": 1}
    assert prepared.dropped[0].turn == 1


@pytest.mark.parametrize("kind", TOKENIZERS)
def test_split_turns_masks_reasoning_of_its_own_turn(kind: str, request: pytest.FixtureRequest) -> None:
    tok = tokenizer(model_dir(request, kind, "qwen3_5_think"))
    row = reviewed_row()
    samples = render_turns(messages(row), TOOLS, tok, row["masked_reasoning_turns"])
    trained = [[s["text"] for s in segments(tok, x) if s["trained"]] for x in samples]
    assert trained == [["look\n</think>\n\n" + CALL_LS], ["\n\n" + CALL_CAT],
                       ["I can answer.\n</think>\n\nDone.<|im_end|>"]]


@pytest.mark.parametrize("kind", TOKENIZERS)
def test_long_rows_are_dropped_and_counted_or_split(kind: str, request: pytest.FixtureRequest) -> None:
    tok = tokenizer(model_dir(request, kind, "qwen3_5_think"))
    row = SFTRow.model_validate(reviewed_row())
    whole = render_sample(row.messages, row.tools, tok, row.masked_reasoning_turns)
    turns = render_turns(row.messages, row.tools, tok, row.masked_reasoning_turns)
    limit = len(turns[1].input_ids)  # the first two turns fit alone, the last and the whole row do not
    assert len(turns[2].input_ids) > limit and len(whole.input_ids) > limit
    dropped = prepare([row], tok, max_length=limit, split_turns=False)
    assert dropped.samples == [] and dropped.rows_used == 0
    assert [(d.row, d.turn, d.reason, d.detail) for d in dropped.dropped] == [
        (0, None, "too_long", f"{len(whole.input_ids)} tokens > max_length {limit}")]
    split = prepare([row], tok, max_length=limit, split_turns=True)
    assert [s.input_ids for s in split.samples] == [turns[0].input_ids, turns[1].input_ids]
    assert split.rows_used == 1 and [(d.turn, d.reason) for d in split.dropped] == [(6, "too_long")]


def test_bad_rows_name_the_line_and_field(tmp_path: Path) -> None:
    row = reviewed_row()
    no_messages = {k: v for k, v in row.items() if k != "messages"}
    path = write_rows(tmp_path / "d.jsonl", [row, no_messages])
    with pytest.raises(InputError) as err:
        read_rows(path)
    assert str(err.value) == (f"{path}: line 2: messages: missing (a build-sft row has messages and tools; a TRL "
                              "row has messages, or prompt and completion)")
    write_rows(path, [{**row, "masked_reasoning_turns": [3]}])
    with pytest.raises(InputError) as err:
        read_rows(path)
    assert str(err.value) == f"{path}: line 1: masked_reasoning_turns: 3 is not the index of an assistant message"
    write_rows(path, [{**row, "messages": [{"role": "robot", "content": "x"}]}])
    with pytest.raises(InputError) as err:
        read_rows(path)
    assert str(err.value).startswith(f"{path}: line 1: messages.0.role: Input should be")


def test_inspect_sft_json_is_the_segments_the_loss_sees(tiny_model_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    import json

    from typer.testing import CliRunner

    from unscaffold.cli import app

    row = reviewed_row()
    data = write_rows(tmp_path / "d.jsonl", [two_queries_row(), row])
    result = CliRunner().invoke(app, ["inspect-sft", str(data), "--model", str(tiny_model_dir), "--row", "1",
                                      "--json"])
    assert result.exit_code == 0, result.output
    sample = render_sample(messages(row), TOOLS, tokenizer(tiny_model_dir), row["masked_reasoning_turns"])
    assert json.loads(result.output) == segments(tokenizer(tiny_model_dir), sample)
    text = CliRunner().invoke(app, ["inspect-sft", str(data), "--model", str(tiny_model_dir), "--row", "1"])
    assert text.exit_code == 0 and f"{len(sample.input_ids)} tokens, {sample.trained_tokens} trained" in text.output
    # trained spans are marked in the text as well as by colour: a log or a pipe shows them too
    shown = " ".join(text.output.split())
    shown = shown[:shown.rindex(f"{len(sample.input_ids)} tokens")]  # the row, without the closing count
    trained = [seg["text"] for seg in segments(tokenizer(tiny_model_dir), sample) if seg["trained"]]
    assert trained and shown.count("⟦") == shown.count("⟧") == len(trained)
    assert all(" ".join(f"⟦{t}⟧".split()) in shown for t in trained)


@pytest.mark.parametrize(("args", "message"), [
    (["--row", "5"], "{data}: --row: 5 is out of range: the file has 2 rows"),
    (["--row", "1"], "{data}: row 1: messages: missing (a build-sft row has messages and tools; a TRL row has "
                     "messages, or prompt and completion)"),
    (["--row", "0", "--model", "/nowhere/model"],
     "--model: '/nowhere/model' is not a model folder (nor a hub id, nor tiny)"),
    (["--row", "0"], "{data}: row 0: turn 1: the generation prompt is not a text prefix of the full rendering (the "
     "template renders earlier turns differently once later messages exist); use --split-turns"),
])
def test_inspect_sft_errors_are_one_line_exit_2(args: list[str], message: str, tiny_model_dir: Path,  # noqa: F811
                                                tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from unscaffold.cli import app

    no_messages = {k: v for k, v in reviewed_row().items() if k != "messages"}
    data = write_rows(tmp_path / "d.jsonl", [two_queries_row(), no_messages])
    model = [] if "--model" in args else ["--model", str(tiny_model_dir)]
    result = CliRunner().invoke(app, ["inspect-sft", str(data), *model, *args])
    assert result.exit_code == 2
    assert result.output == f"error: {message.format(data=data)}\n"


def test_a_tokenizer_merging_newlines_breaks_the_prefix_at_token_level(tiny_model_dir: Path,  # noqa: F811
                                                                       tmp_path: Path) -> None:
    """Real Qwen tokenizers have one token for "\\n\\n": a Qwen3.5 turn with empty reasoning renders as
    `<think>\\n\\n</think>` while its generation prompt ends in `<think>\\n`, so the texts agree and the
    tokens do not. The check sees it; --split-turns trains the turn after the prompt as generated."""
    import json
    import shutil

    data = json.loads((tiny_model_dir / "tokenizer.json").read_text())
    vocab, merges = data["model"]["vocab"], data["model"]["merges"]
    vocab["ĊĊ"] = vocab.pop("".join(merges[-1]))  # the last merge's token becomes the newline pair
    merges[-1] = ["Ċ", "Ċ"]
    merged = tmp_path / "merged"
    merged.mkdir()
    for name in ("tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(tiny_model_dir / name, merged / name)
    (merged / "tokenizer.json").write_text(json.dumps(data))
    tok = tokenizer(merged)
    assert tok("<think>\n\n</think>", add_special_tokens=False)["input_ids"][1] == vocab["ĊĊ"]
    row = reviewed_row()
    row["messages"][2]["reasoning_content"] = ""
    msgs = messages(row)
    with pytest.raises(PrefixPropertyError) as err:
        render_with_masks(msgs, TOOLS, tok)
    assert err.value.turn == 2 and "the generation prompt's tokens are not a prefix" in str(err.value)
    first = render_turns(msgs, TOOLS, tok)[0]
    prompt = tok(tok.apply_chat_template(row["messages"][:2], tools=TOOLS, add_generation_prompt=True,
                                         tokenize=False), add_special_tokens=False)["input_ids"]
    assert first.input_ids[: len(prompt)] == prompt
    assert [s["text"] for s in segments(tok, first) if s["trained"]] == ["\n</think>\n\n" + CALL_LS]
    # kept by default: this row alone trains turn by turn, each span right after its generation prompt
    prepared = prepare([SFTRow.model_validate(row)], tok, max_length=10_000, split_turns=False)
    assert (prepared.dropped, prepared.rows_split, prepared.rows_used) == ([], [0], 1)
    turns = render_turns(msgs, TOOLS, tok, row["masked_reasoning_turns"])
    assert [(s.input_ids, s.completion_mask) for s in prepared.samples] == [
        (s.input_ids, s.completion_mask) for s in turns]
    assert prepared.samples[0].completion_mask == [0] * len(prompt) + [1] * (len(first.input_ids) - len(prompt))


def test_a_reasoning_less_replacement_is_kept_with_an_exact_span_on_qwen_bpe(
        qwen_bpe_think_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    """Real Qwen ids: the prompt ends `<think>` `\\n` (198); the model then writes `\\n` `</think>` `\\n\\n` (271),
    which a whole-row rendering (`<think>` `\\n\\n` `</think>`) can never hold."""
    import json

    from typer.testing import CliRunner

    from unscaffold.cli import app

    tok = tokenizer(qwen_bpe_think_dir)
    row = reasoning_less_row()
    prepared = prepare([SFTRow.model_validate(row)], tok, max_length=10_000, split_turns=False)
    assert (prepared.dropped, prepared.rows_split, len(prepared.samples)) == ([], [0], 3)
    first = prepared.samples[0]
    prompt_text = tok.apply_chat_template(row["messages"][:2], tools=TOOLS, add_generation_prompt=True,
                                          tokenize=False)
    prompt = tok(prompt_text, add_special_tokens=False)["input_ids"]
    assert prompt[-2:] == [151667, 198]
    assert first.input_ids[: len(prompt)] == prompt
    assert first.completion_mask == [0] * len(prompt) + [1] * (len(first.input_ids) - len(prompt))
    assert first.input_ids[len(prompt): len(prompt) + 3] == [198, 151668, 271]
    assert [s["text"] for s in segments(tok, first) if s["trained"]] == ["\n</think>\n\n" + CALL_LS]
    data = write_rows(tmp_path / "d.jsonl", [row])
    result = CliRunner().invoke(app, ["inspect-sft", str(data), "--model", str(qwen_bpe_think_dir), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [segments(tok, s) for s in prepared.samples]


@pytest.mark.parametrize("kind", TOKENIZERS)
def test_trl_format_rows_inspect_like_build_sft_rows(kind: str, request: pytest.FixtureRequest,
                                                     tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from unscaffold.cli import app

    path = model_dir(request, kind, "qwen3_5_think")
    rows = write_rows(tmp_path / "rows.jsonl", [reviewed_row(), trl_format(reviewed_row()),
                                                prompt_completion_format(reviewed_row())])
    parsed = read_rows(rows)
    assert [c.id for m in parsed[1].messages for c in m.tool_calls or ()] == ["call_2_0", "call_4_0"]
    assert [m.tool_call_id for m in parsed[1].messages if m.role == "tool"] == ["call_2_0", "call_4_0"]
    assert parsed[1].messages[4].reasoning_content == "The student proposal skipped a check."
    assert parsed[2].messages == parsed[1].messages and parsed[2].tools == parsed[0].tools == TOOLS
    assert parsed[2].context_turns == []
    outputs = [CliRunner().invoke(app, ["inspect-sft", str(rows), "--model", str(path), "--row", str(n), "--json"])
               for n in (0, 1, 2)]
    assert [r.exit_code for r in outputs] == [0, 0, 0]
    assert json.loads(outputs[1].output) == json.loads(outputs[0].output) == json.loads(outputs[2].output)
    assert any(s["trained"] and "cat a.txt" in s["text"] for s in json.loads(outputs[1].output))


def test_prompt_completion_rows_train_only_the_completion_and_name_bad_tools(tmp_path: Path) -> None:
    from unscaffold.errors import InputError

    row = prompt_completion_format(reviewed_row())
    row["prompt"] = row["prompt"] + row["completion"][:2]  # an assistant turn in the prompt: context only
    row["completion"] = row["completion"][2:]
    [parsed] = read_rows(write_rows(tmp_path / "a.jsonl", [row]))
    assert parsed.context_turns == [2]
    bad = {**prompt_completion_format(reviewed_row()), "tools": "[{not json"}
    path = write_rows(tmp_path / "b.jsonl", [bad])
    with pytest.raises(InputError) as err:
        read_rows(path)
    assert str(err.value).startswith(f"{path}: line 1: tools: a JSON string that is not valid JSON: ")
    path = write_rows(tmp_path / "c.jsonl", [{"prompt": "Do it.", "completion": []}])
    with pytest.raises(InputError) as err:
        read_rows(path)
    assert str(err.value) == (f"{path}: line 1: prompt: expected a list of messages (TRL's conversational "
                              "prompt/completion format)")
