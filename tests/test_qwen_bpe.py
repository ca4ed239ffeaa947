"""The offline Qwen tokenizer tokenizes as published Qwen3 checkpoints do."""

import pytest

from unscaffold.offline.qwen_bpe import load_qwen_tokenizer, tiktoken_file

pytestmark = pytest.mark.skipif(tiktoken_file() is None, reason="qwen.tiktoken missing (make installs dashscope)")


def test_ids_match_published_qwen3() -> None:
    tok = load_qwen_tokenizer()
    assert len(tok) == 151_669
    assert tok.encode("\n\n") == [271]
    assert tok.encode("\n\n\n") == [1406]
    assert tok.encode("<|im_start|>assistant\n<think>\n\n</think>\n\nHello world 12") == [
        151644, 77091, 198, 151667, 271, 151668, 271, 9707, 1879, 220, 16, 17,
    ]
    assert tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_end|>", "<tool_call>", "</think>"]) == [
        151643, 151645, 151657, 151668,
    ]


def test_round_trip_and_special_flags() -> None:
    tok = load_qwen_tokenizer()
    text = "héllo wörld 日本語\n\n  x\t[exit_code=0]"
    assert tok.decode(tok.encode(text)) == text
    ids = tok.encode("<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>")
    assert tok.decode(ids, skip_special_tokens=True) == "user\n<tool_response>\nok\n</tool_response>"
