"""Checkpoint folders that tokenize as real Qwen models do: the Qwen BPE (`llm/qwen_bpe.py`, one token for
`\\n\\n`) with TRL's Qwen chat templates, beside a tiny random Qwen3 of that vocabulary so `hf:` loads them.
Tests that parametrize over `TOKENIZERS` run once on the tiny trained tokenizer and once on these."""

from __future__ import annotations

from pathlib import Path

import pytest

from unscaffold.offline.qwen_bpe import load_qwen_tokenizer, tiktoken_file
from unscaffold.offline.tiny import read_trl_template

QWEN_BPE = pytest.param("qwen-bpe", marks=pytest.mark.skipif(
    tiktoken_file() is None, reason="qwen.tiktoken missing (the Makefile installs dashscope)"))
TOKENIZERS = ["tiny", QWEN_BPE]


def build_qwen_bpe_model(out: Path, template: str) -> Path:
    """The Qwen tokenizer with a TRL template and a 2-layer random Qwen3 (about 40 MB, seconds on a CPU)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = load_qwen_tokenizer(read_trl_template(template))
    eos, pad = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=8, max_position_embeddings=4096,
                         tie_word_embeddings=True, bos_token_id=None, eos_token_id=eos, pad_token_id=pad)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = Qwen3ForCausalLM(config)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def qwen_bpe_think_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real Qwen BPE + TRL's Qwen3.5 (thinking) template."""
    if tiktoken_file() is None:
        pytest.skip("qwen.tiktoken missing (the Makefile installs dashscope)")
    return build_qwen_bpe_model(tmp_path_factory.mktemp("qwen-bpe") / "qwen3_5_think", "qwen3_5_think")


@pytest.fixture(scope="session")
def qwen_bpe_qwen3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real Qwen BPE + TRL's Qwen3 template (JSON tool calls)."""
    if tiktoken_file() is None:
        pytest.skip("qwen.tiktoken missing (the Makefile installs dashscope)")
    return build_qwen_bpe_model(tmp_path_factory.mktemp("qwen-bpe") / "qwen3", "qwen3")


def model_dir(request: pytest.FixtureRequest, kind: str, template: str) -> Path:
    """The checkpoint folder of one tokenizer kind (`tiny` or `qwen-bpe`) and template family."""
    names = {("tiny", "qwen3_5_think"): "tiny_model_dir", ("tiny", "qwen3"): "tiny_qwen3_dir",
             ("qwen-bpe", "qwen3_5_think"): "qwen_bpe_think_dir", ("qwen-bpe", "qwen3"): "qwen_bpe_qwen3_dir"}
    return request.getfixturevalue(names[(kind, template)])
