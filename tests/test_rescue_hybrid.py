"""`rescue train --model tiny-qwen3.5`: rescue GRPO on the Qwen3.5 hybrid, and its log-probabilities."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from fixtures_tiny import tiny_hybrid_cache  # noqa: F401  (pytest fixture)
from typer.testing import CliRunner

from tests.helpers import needs_bwrap
from unscaffold.cli import app
from unscaffold.offline.tiny import HYBRID_NAME
from unscaffold.rescue.trl_rescue import RescueGRPOTrainer

# a fixed completion: what a student's tool call looks like under the Qwen3.5 template
COMPLETION = ("<think>\nI look at the workspace first.\n</think>\n\n<tool_call>\n<function=execute>\n"
              "<parameter=command>\nls\n</parameter>\n</function>\n</tool_call><|im_end|>")
PROMPTS = [[{"role": "user", "content": "List the files."}],
           [{"role": "system", "content": "Work carefully."}, {"role": "user", "content": "Write 3 to answer.txt."}]]


def plain_logps(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, n_completion: int,
                temperature: float) -> list[list[float]]:
    """Per row, without any padding: the log-probability of each unmasked completion token."""
    rows = []
    with torch.no_grad():
        for ids, mask in zip(input_ids, attention_mask, strict=True):
            kept = ids[mask.bool()]
            n = int(mask[-n_completion:].sum())
            # the head only where completion tokens are predicted: a 151k vocabulary makes it the dearest part
            logits = model(input_ids=kept[None], use_cache=False, logits_to_keep=n + 1).logits[0, :-1] / temperature
            logps = torch.log_softmax(logits.float(), dim=-1).gather(1, kept[-n:, None])[:, 0]
            rows.append(logps.tolist())
    return rows


def fixed_batch(tokenizer: Any) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Two prompts of different lengths, left-padded, each followed by the fixed completion (the second one
    cut short and right-padded), as GRPO lays out prompt + completion."""
    prompts = [tokenizer(tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False),
                         add_special_tokens=False)["input_ids"] for p in PROMPTS]
    completion = tokenizer(COMPLETION, add_special_tokens=False)["input_ids"]
    completions = [completion, completion[:-5]]
    width_p, width_c = max(map(len, prompts)), len(completion)
    pad = tokenizer.pad_token_id
    ids, mask = [], []
    for p, c in zip(prompts, completions, strict=True):
        ids.append([pad] * (width_p - len(p)) + p + c + [pad] * (width_c - len(c)))
        mask.append([0] * (width_p - len(p)) + [1] * (len(p) + len(c)) + [0] * (width_c - len(c)))
    return torch.tensor(ids), torch.tensor(mask), width_c


@needs_bwrap
def test_rescue_train_on_the_hybrid_and_its_logps_equal_a_plain_forward(
        tiny_hybrid_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """One real rescue GRPO step on `tiny-qwen3.5`. Each time the trainer computes log-probabilities (its rollouts
    and a fixed completion, left-padded prompts in one batch), they are checked against a forward pass of the same
    weights on each row alone: padding must not leak into the linear-attention state."""
    monkeypatch.setenv("UNSCAFFOLD_CACHE", str(tiny_hybrid_cache))
    original = RescueGRPOTrainer._get_per_token_logps_and_entropies
    checked: list[str] = []
    differences: list[float] = []

    def compare(trainer: Any, model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, n: int,
                got: torch.Tensor | None = None) -> None:
        if got is None:
            with torch.no_grad():
                got, _, _ = original(trainer, model, input_ids, attention_mask, n)
        got = got.detach()
        want = plain_logps(model, input_ids, attention_mask, n, trainer.temperature)
        for row, mask, expected in zip(got, attention_mask[:, -n:], want, strict=True):
            kept = row[mask.bool()].tolist()
            assert len(kept) == len(expected) > 0
            differences.append(max(abs(a - b) for a, b in zip(kept, expected, strict=True)))

    def spy(self: Any, model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
            *args: Any, **kwargs: Any) -> Any:
        result = original(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
        if not checked:
            compare(self, model, *fixed_batch(self.processing_class))
            checked.append("fixed")
        compare(self, model, input_ids, attention_mask, logits_to_keep, got=result[0])  # what the loss uses
        checked.append("rollouts")
        return result

    monkeypatch.setattr(RescueGRPOTrainer, "_get_per_token_logps_and_entropies", spy)
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["rescue", "train", "appworld_lite", "--model", HYBRID_NAME, "--router",
                                      "random", "--max-steps", "1", "--k", "2", "--tasks-per-step", "1",
                                      "--steps-per-generation", "1", "--max-completion-length", "8",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1] and lines[0]["rollouts"] == 4  # K base, then K rescue rollouts
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"] == str(tiny_hybrid_cache / "tiny-qwen3.5" / "qwen3_5_think-seed0")
    adapter = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert {"in_proj_qkv", "in_proj_z", "in_proj_a", "in_proj_b", "out_proj"} <= set(adapter["target_modules"])
    assert checked[0] == "fixed" and "rollouts" in checked
    assert max(differences) < 1e-4
