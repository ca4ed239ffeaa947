"""The Qwen3.5 hybrid (Gated DeltaNet linear attention + full attention) through SFT, merge and generation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from fixtures_tiny import tiny_hybrid_cache, tiny_qwen3_dir  # noqa: F401  (pytest fixtures)
from sft_rows import TOOLS, overfit_rows, reviewed_row, write_rows
from typer.testing import CliRunner

from unscaffold.cli import app
from unscaffold.errors import InputError
from unscaffold.llm.types import Message
from unscaffold.offline.qwen_bpe import tiktoken_file
from unscaffold.offline.tiny import HYBRID, HYBRID_NAME, read_trl_template, resolve_model_path, tiny_model_dir
from unscaffold.sft.config import TrainConfig
from unscaffold.sft.render import assistant_turns, render_sample, render_turns
from unscaffold.sft.train import missing_packing_kernels, resolve_hardware, train_sft

LINEAR = ["linear_attn.in_proj_qkv", "linear_attn.in_proj_z", "linear_attn.in_proj_a", "linear_attn.in_proj_b",
          "linear_attn.out_proj"]
FULL = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"]
MLP = ["mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]


@pytest.fixture
def hybrid(tiny_hybrid_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:  # noqa: F811
    """The built model's folder, with `tiny-qwen3.5` resolving to it."""
    monkeypatch.setenv("UNSCAFFOLD_CACHE", str(tiny_hybrid_cache))
    return tiny_model_dir(arch=HYBRID, cache=tiny_hybrid_cache)


@pytest.fixture(scope="module")
def trained(tiny_hybrid_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    """One SFT step on the hybrid by name: enough to move every LoRA B away from zero."""
    root = tmp_path_factory.mktemp("sft")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UNSCAFFOLD_CACHE", str(tiny_hybrid_cache))
        train_sft(write_rows(root / "data.jsonl", short_rows(4)), root / "run", TrainConfig(
            model=HYBRID_NAME, max_steps=1, batch_size=2, per_device_batch_size=2, learning_rate=1e-2,
            warmup_ratio=0.0, gradient_checkpointing=True), progress=False)
    return root / "run"


def load(path: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


@pytest.fixture(scope="module")
def loaded(tiny_hybrid_cache: Path) -> tuple[Any, Any]:  # noqa: F811
    """The hybrid and its tokenizer, loaded once; tests that wrap the model in PEFT take a deep copy."""
    return load(tiny_model_dir(arch=HYBRID, cache=tiny_hybrid_cache))


def test_tiny_qwen3_5_is_the_hybrid_with_the_real_template_and_tokenizer(hybrid: Path,
                                                                          loaded: tuple[Any, Any]) -> None:
    model, tok = loaded
    assert resolve_model_path(HYBRID_NAME) == str(hybrid)
    assert type(model).__name__ == "Qwen3_5ForCausalLM" and model.config.model_type == "qwen3_5_text"
    assert model.config.layer_types == ["linear_attention"] * 3 + ["full_attention"]
    assert model.config.hidden_size == 64 and model.config.num_hidden_layers == 4
    assert tok.chat_template == read_trl_template("qwen3_5_think")
    if tiktoken_file() is not None:  # the real Qwen BPE: `\n\n` is one token, rank 271
        assert len(tok) == 151_669 and tok.encode("\n\n") == [271]
        assert tok.convert_tokens_to_ids(["<|im_end|>", "<think>"]) == [151645, 151667]
    assert model.config.vocab_size == len(tok)


def targets(ids: list[int], mask: list[int]) -> list[int]:
    return [i if m else -100 for i, m in zip(ids, mask, strict=True)]


def packed_and_unpacked_losses(model: Any, samples: list[tuple[list[int], list[int]]]) -> tuple[Any, float, float]:
    """TRL's padding-free batch of the samples; the loss of the samples one by one; the loss of the packed row
    with only its position ids (what a kernel ignoring sequence boundaries computes)."""
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    collator = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)
    packed = collator([{"input_ids": ids, "labels": targets(ids, mask)} for ids, mask in samples])

    def summed(logits: torch.Tensor, labels: torch.Tensor) -> tuple[float, int]:
        targets = labels[:, 1:].reshape(-1)
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), targets,
                                                 ignore_index=-100, reduction="sum")
        return float(loss), int((targets != -100).sum())

    total, count = 0.0, 0
    with torch.no_grad():
        for ids, mask in samples:
            labels = torch.tensor([targets(ids, mask)])
            s, n = summed(model(input_ids=torch.tensor([ids])).logits, labels)
            total, count = total + s, count + n
        s, n = summed(model(input_ids=packed["input_ids"], position_ids=packed["position_ids"],
                            use_cache=False).logits, packed["labels"])
    assert n == count  # the same targets in both
    return packed, total / count, s / n


def packed_loss(model: Any, packed: dict[str, Any]) -> float:
    """The mean loss of TRL's padding-free batch as its trainer computes it (no cache: training)."""
    with torch.no_grad():
        logits = model(**{k: v for k, v in packed.items() if k != "labels"}, use_cache=False).logits
    labels = packed["labels"][:, 1:].reshape(-1)
    return float(torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels))


def short_rows(n: int) -> list[dict[str, Any]]:
    """The overfit rows without the tool schema in the system prompt: about 80 tokens instead of 370."""
    return [{**row, "tools": []} for row in overfit_rows(n)]


def samples_of(tok: Any) -> list[tuple[list[int], list[int]]]:
    out = []
    for row in short_rows(3):
        sample = render_sample([Message.model_validate(m) for m in row["messages"]], row["tools"], tok)
        out.append((sample.input_ids, sample.completion_mask))
    return out


def test_packed_loss_of_the_plain_qwen3_equals_the_unpacked_loss(tiny_qwen3_dir: Path) -> None:  # noqa: F811
    """The measurement itself: full attention keeps TRL's packed sequences apart, to 1e-4."""
    model, tok = load(tiny_qwen3_dir)
    packed, unpacked, positions_only = packed_and_unpacked_losses(model, samples_of(tok))
    assert abs(packed_loss(model, packed) - unpacked) < 1e-4
    assert abs(positions_only - unpacked) < 1e-4  # sdpa finds the boundaries in the position ids


def test_packed_hybrid_loss_equals_unpacked_or_padding_free_is_refused(hybrid: Path, loaded: tuple[Any, Any],
                                                                       tmp_path: Path) -> None:
    model, tok = loaded
    packed, unpacked, positions_only = packed_and_unpacked_losses(model, samples_of(tok))
    if not missing_packing_kernels():
        assert abs(packed_loss(model, packed) - unpacked) < 1e-4
        return
    # the reference kernels carry one sequence's recurrent and convolution state into the next
    assert abs(positions_only - unpacked) > 1e-3
    with pytest.raises(ValueError, match="can't keep packed sequences apart without"):
        packed_loss(model, packed)
    # so train-sft refuses padding-free for the hybrid, and auto never turns it on for it
    config = TrainConfig(model=HYBRID_NAME, padding_free=True, per_device_batch_size=2, batch_size=2)
    with pytest.raises(InputError) as err:
        train_sft(write_rows(tmp_path / "d.jsonl", short_rows(2)), tmp_path / "run", config, progress=False)
    assert str(err.value) == ("train-sft: padding_free: a hybrid (linear-attention) model mixes packed sequences "
                              f"without {' and '.join(missing_packing_kernels())}; install them or set "
                              "padding_free to false")
    auto = TrainConfig(model=HYBRID_NAME, attn_implementation="flash_attention_2", per_device_batch_size=8)
    assert resolve_hardware(auto, hybrid=True)["padding_free"] is False
    assert resolve_hardware(auto, hybrid=False)["padding_free"] is True


def test_gradient_checkpointing_gives_the_same_lora_gradients(loaded: tuple[Any, Any]) -> None:
    import copy

    from peft import LoraConfig, get_peft_model

    model, tok = copy.deepcopy(loaded[0]), loaded[1]
    torch.manual_seed(0)
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    for name, param in model.named_parameters():
        if "lora_B" in name:  # B starts at zero, which would leave A's gradient zero too
            torch.nn.init.normal_(param, std=0.1)
    (ids, mask), = samples_of(tok)[:1]
    input_ids = torch.tensor([ids])
    labels = torch.tensor([targets(ids, mask)])
    model.train()

    def grads() -> dict[str, torch.Tensor]:
        model.zero_grad()
        model(input_ids=input_ids, labels=labels, use_cache=False).loss.backward()  # as TRL trains: no cache
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}

    plain = grads()
    model.base_model.model.activation_checkpointing_enable({"use_reentrant": False})  # what train-sft turns on
    model.enable_input_require_grads()
    checkpointed_layers: list[int] = []
    for i, layer in enumerate(model.base_model.model.model.layers):
        def counted(*args: Any, _i: int = i, _f: Any = layer._gradient_checkpointing_func, **kwargs: Any) -> Any:
            checkpointed_layers.append(_i)
            return _f(*args, **kwargs)

        layer._gradient_checkpointing_func = counted
    checkpointed = grads()
    assert checkpointed_layers == [0, 1, 2, 3]  # the recurrent layers too went through torch's checkpoint
    assert plain.keys() == checkpointed.keys() and any("linear_attn.in_proj_qkv" in n for n in plain)
    for name, grad in plain.items():
        assert grad.abs().sum() > 0, name
        torch.testing.assert_close(checkpointed[name], grad, rtol=1e-5, atol=1e-7, msg=name)


def test_sft_trains_every_linear_attention_projection_and_no_convolution(trained: Path) -> None:
    summary = json.loads((trained / "summary.json").read_text())
    assert summary["steps"] == 1 and summary["hardware"]["padding_free"] is False
    assert summary["lora_modules"] == {**{m: 3 for m in LINEAR}, **{m: 1 for m in FULL}, **{m: 4 for m in MLP}}
    adapter = json.loads((trained / "adapter_config.json").read_text())
    assert set(adapter["target_modules"]) == {m.rsplit(".", 1)[1] for m in LINEAR + FULL + MLP}
    from safetensors.torch import load_file

    weights = load_file(str(trained / "adapter_model.safetensors"))
    assert not any("conv1d" in name for name in weights)
    moved = {name for name, t in weights.items() if "lora_B" in name and float(t.abs().sum()) > 0}
    assert any("linear_attn.in_proj_qkv" in name for name in moved) and any("self_attn.q_proj" in n for n in moved)


def test_merged_logits_equal_the_adapter_logits(trained: Path, loaded: tuple[Any, Any], tmp_path: Path) -> None:
    import copy

    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    result = CliRunner().invoke(app, ["merge", str(trained), "--out", str(tmp_path / "merged")])
    assert result.exit_code == 0, result.output
    assert {"tokenizer.json", "chat_template.jinja"} <= {f.name for f in (tmp_path / "merged").iterdir()}
    merged, tok = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").eval(), loaded[1]
    assert merged.config.layer_types == ["linear_attention"] * 3 + ["full_attention"]
    adapted = PeftModel.from_pretrained(copy.deepcopy(loaded[0]), str(trained)).eval()
    ids = torch.tensor([samples_of(tok)[0][0]])
    with torch.no_grad():
        expected, got, plain = adapted(input_ids=ids).logits, merged(input_ids=ids).logits, loaded[0](ids).logits
    tolerance = 1e-4 * float(expected.abs().max())  # float32 rounding of W + BA against Wx + B(Ax), 4 layers deep
    torch.testing.assert_close(got, expected, rtol=0, atol=tolerance)
    assert float((expected - plain).abs().max()) > 100 * tolerance  # the adapter moves the logits far more


def test_hf_prompt_is_the_training_prefix_on_the_hybrid(trained: Path, hybrid: Path) -> None:
    from unscaffold.llm.hf_backend import HFModel
    from unscaffold.specs import ModelSpec

    spec = ModelSpec.parse(f"hf:{HYBRID_NAME}+{trained}")
    hf = HFModel(str(spec), spec.target, adapter=spec.adapter, max_new_tokens=4, device="cpu")
    msgs = [Message.model_validate(m) for m in reviewed_row()["messages"]]
    tok = hf.tokenizer
    sample = render_sample(msgs, TOOLS, tok)
    starts = [i for i in range(1, len(sample.completion_mask))
              if sample.completion_mask[i] and not sample.completion_mask[i - 1]]
    for start, k in zip(starts, assistant_turns(msgs), strict=True):
        assert sample.input_ids[:start] == hf.prompt_ids(msgs[:k], TOOLS)
    for sample_k, k in zip(render_turns(msgs, TOOLS, tok), assistant_turns(msgs), strict=True):
        prompt = hf.prompt_ids(msgs[:k], TOOLS)
        assert sample_k.input_ids[: len(prompt)] == prompt
    response = hf.complete(msgs[:2], TOOLS)
    assert response.usage.input_tokens == len(hf.prompt_ids(msgs[:2], TOOLS)) and response.usage.output_tokens >= 1


def test_greedy_generation_with_and_without_the_cache_agree(loaded: tuple[Any, Any]) -> None:
    model, tok = loaded
    task = "List the files, then count the lines of every Python file and write the total to answer.txt. " * 4
    prompt = tok.apply_chat_template([{"role": "user", "content": task}], add_generation_prompt=True, tokenize=False)
    ids = torch.tensor([tok(prompt, add_special_tokens=False)["input_ids"]])
    assert ids.shape[1] > 64  # the prefill spans two chunks of the chunked delta rule
    runs = {}
    for use_cache in (True, False):
        with torch.no_grad():
            runs[use_cache] = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=12,
                                             min_new_tokens=12, do_sample=False, use_cache=use_cache,
                                             output_scores=True, return_dict_in_generate=True)
    cached, uncached = runs[True], runs[False]
    assert cached.sequences.tolist() == uncached.sequences.tolist()
    assert cached.sequences.shape[1] == ids.shape[1] + 12
    for a, b in zip(cached.scores, uncached.scores, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
