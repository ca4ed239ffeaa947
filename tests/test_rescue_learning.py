"""Learning that depends on correct advantages, on a deterministic toy: the tiny model fails every
base-harness rollout, and every rollout under the sibling `submit-guard` succeeds. The rescue groups
(the fixed mixture: one rollout under `docs-first`, one under `submit-guard`) then carry advantage +1
on the sibling's rollouts and -1 on the others; after a few steps the rescued rollouts are more likely,
and the others less, under the base harness's own prompt. The same run with each group's advantages
shuffled (swapped) moves them the other way, so the test fails if advantages reach the loss wrongly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tests.helpers import needs_bwrap
from tests.test_rescue_train import _write
from unscaffold.benchmarks import load_suite
from unscaffold.cli import app
from unscaffold.rescue.environment import HarnessEnvironment


def completion_logp(model: torch.nn.Module, prompt: list[int], completion: list[int], mask: list[int]) -> float:
    """Sum of log-probabilities of the policy tokens of `completion` after `prompt`."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1: -1]
    logps = torch.log_softmax(logits.float(), dim=-1).gather(1, torch.tensor(completion).unsqueeze(1)).squeeze(1)
    return float((logps * torch.tensor(mask, dtype=logps.dtype)).sum())


@needs_bwrap
@pytest.mark.parametrize("advantages", ["correct", "shuffled"])
def test_rescued_behaviour_becomes_more_likely_under_the_base_harness(
        advantages: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UNSCAFFOLD_CACHE", str(tmp_path / "cache"))
    original = HarnessEnvironment.get_reward
    monkeypatch.setattr(HarnessEnvironment, "get_reward", lambda self: 1.0 if self.context.harness_name ==
                        "submit-guard" else original(self))
    import unscaffold.rescue.groups as groups
    import unscaffold.rescue.trl_rescue as trl_rescue

    if advantages == "shuffled":
        real_advantages = groups.group_advantages
        monkeypatch.setattr(groups, "group_advantages", lambda rewards, eps=groups.STD_EPS:
                            real_advantages(rewards, eps)[::-1])
    captured: list[tuple[str, list[int], list[int]]] = []  # (sibling, completion ids, policy-token mask)
    real_replace = trl_rescue.replace_rows

    def spy(base: dict, rescue: dict, rows: list[int], pad_token_id: int) -> dict:
        for i, (ids, mask, tool) in enumerate(zip(rescue["completion_ids"], rescue["completion_mask"],
                                                  rescue["tool_mask"], strict=True)):
            keep = (mask * tool).tolist()
            n = int(mask.sum())
            captured.append((["docs-first", "submit-guard"][i % 2], ids[:n].tolist(), keep[:n]))
        return real_replace(base, rescue, rows, pad_token_id)

    monkeypatch.setattr(trl_rescue, "replace_rows", spy)
    task = load_suite("appworld_lite").tasks("train")[0]
    out = tmp_path / "run"
    table = tmp_path / "table.json"  # the rule router ranks docs-first, then submit-guard, for every task
    table.write_text(json.dumps({"tasks": [{"task_id": "v", "text": "any", "rewards": {
        "base": [0.0], "docs-first": [1.0], "submit-guard": [0.5]}}]}))
    result = CliRunner().invoke(app, [
        "rescue", "train", "appworld_lite", "--model", "tiny", "--pool", str(_write(tmp_path)), "--router", "rule",
        "--validation", str(table), "--tasks", task.id, "--max-steps", "4", "--k", "2", "--tasks-per-step", "1",
        "--steps-per-generation", "1",
        "--max-completion-length", "12", "--learning-rate", "0.05", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert len(captured) == 8 and [c[0] for c in captured] == ["docs-first", "submit-guard"] * 4

    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from unscaffold.llm.hf_backend import HFModel
    from unscaffold.llm.types import Message
    from unscaffold.minimal_harness.harness import MinimalHarness

    model_dir = tmp_path / "cache" / "tiny" / "qwen3_5_think-seed0"
    h = MinimalHarness()
    prompt = HFModel("hf:tiny", str(model_dir)).prompt_ids(
        [Message(role="system", content=h.system_prompt()), Message(role="user", content=task.instruction)], h.tools())
    before = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    logp_before = [completion_logp(before, prompt, ids, mask) for _, ids, mask in captured]
    after = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), str(out / "adapter")).eval()
    logp_after = [completion_logp(after, prompt, ids, mask) for _, ids, mask in captured]
    moved = {name: [b - a for (n, _, _), a, b in zip(captured, logp_before, logp_after, strict=True) if n == name]
             for name in ("docs-first", "submit-guard")}
    rescued = sum(moved["submit-guard"]) / 4 - sum(moved["docs-first"]) / 4
    if advantages == "correct":
        assert rescued > 0.5, moved
    else:
        assert rescued < -0.5, moved
