"""A distilled model served by vLLM sees its earlier turns as training rendered them: the `openai:` backend's
wire messages, read as vLLM reads them, render token for token as the training row."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from fixtures_tiny import tiny_model_dir, tiny_qwen3_dir  # noqa: F401  (pytest fixtures)
from sft_rows import reviewed_row

from unscaffold.llm.openai_backend import OpenAIModel
from unscaffold.llm.types import ServerKind
from unscaffold.sft.data import SFTRow
from unscaffold.sft.render import render_sample


def vllm_template_messages(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What vLLM hands the chat template for a request's `messages` (`vllm/entrypoints/chat_utils.py`): tool
    call arguments parsed from JSON text; an assistant's earlier reasoning read from `reasoning` only and
    given to the template under both names; `reasoning_content` on an incoming message is dropped
    (vllm-project/vllm#38488)."""
    out = []
    for m in wire:
        row = {k: m[k] for k in ("role", "content", "tool_call_id", "name") if k in m}
        if m.get("tool_calls"):
            row["tool_calls"] = [{**c, "function": {**c["function"], "arguments": json.loads(
                c["function"]["arguments"])}} for c in m["tool_calls"]]
        if m["role"] == "assistant" and m.get("reasoning") is not None:
            row["reasoning"] = row["reasoning_content"] = m["reasoning"]
        out.append(row)
    return out


@functools.lru_cache(maxsize=4)
def tokenizer(path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def served_ids(tok: Any, row: SFTRow, server: ServerKind | None, upto: int | None = None) -> list[int]:
    model = OpenAIModel("openai:student", "student", api_key="k", base_url="http://127.0.0.1:1/v1", server=server)
    wire = model.wire_messages(row.messages[:upto])
    text = tok.apply_chat_template(vllm_template_messages(wire), tools=row.tools, tokenize=False,
                                   add_generation_prompt=upto is not None)
    return list(tok(text, add_special_tokens=False)["input_ids"])


@pytest.mark.parametrize("family", ["qwen3_5_think", "qwen3"])
@pytest.mark.parametrize("server", [None, "vllm"])
def test_what_vllm_renders_from_the_wire_is_the_training_row(family: str, server: ServerKind | None,
                                                             request: pytest.FixtureRequest) -> None:
    tok = tokenizer(request.getfixturevalue("tiny_model_dir" if family == "qwen3_5_think" else "tiny_qwen3_dir"))
    row = SFTRow.model_validate(reviewed_row())
    trained = render_sample(row.messages, row.tools, tok).input_ids
    assert served_ids(tok, row, server) == trained
    for k, m in enumerate(row.messages):  # the prompt of every later turn is the training row's prefix
        if m.role == "assistant":
            prompt = served_ids(tok, row, server, upto=k)
            assert trained[:len(prompt)] == prompt, k


def test_reasoning_sent_only_as_reasoning_content_is_lost_on_vllm(tiny_model_dir: Path) -> None:  # noqa: F811
    tok = tokenizer(tiny_model_dir)
    row = SFTRow.model_validate(reviewed_row())
    lost = tok.decode(served_ids(tok, row, "sglang", upto=6))
    kept = tok.decode(served_ids(tok, row, None, upto=6))
    assert "The student proposal skipped a check." in kept and "The student proposal skipped" not in lost
