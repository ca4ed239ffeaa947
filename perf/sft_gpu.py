"""LoRA SFT step throughput and peak memory of a Qwen3.5-9B-shaped model, ready for one H200.

The model is built from the published Qwen3.5-9B text configuration (`QWEN3_5_9B`: 32 layers, hidden 4096, three
Gated DeltaNet linear-attention layers then one full-attention layer, vocabulary 248,320) with random weights, so
nothing is downloaded. LoRA r32 / alpha 32 on every linear layer (the linear-attention projections included),
gradient checkpointing, bf16, AdamW; one row per step of 8k, 32k and 65k tokens with half the positions trained
(as assistant turns are). Printed per length: tokens per second over the timed steps (after one warm-up step) and
the CUDA allocator's peak.

Run: `.venv/bin/python -m perf.sft_gpu [--lengths 8192,32768,65536] [--steps 3] [--json]`;
`--dry-run` builds the 9B configuration and model on the meta device (no memory, no GPU) and prints the shape and
parameter counts; `--smoke` runs a tiny model of the same family on the CPU (to check the script, not to measure)."""

from __future__ import annotations

import time
from typing import Any

from perf.common import command_line, printed_as_json

# The text model of Qwen/Qwen3.5-9B as published (config.json `text_config`), written out rather than taken from
# transformers' defaults, which differ (rope_theta, context) and may move between versions.
QWEN3_5_9B: dict[str, Any] = {
    "vocab_size": 248320, "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 32,
    "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 256, "hidden_act": "silu",
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 8,
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "max_position_embeddings": 262144,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "attention_bias": False,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                        "mrope_section": [11, 11, 10], "mrope_interleaved": True},
}
SMOKE: dict[str, Any] = {
    "vocab_size": 2048, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "linear_key_head_dim": 16,
    "linear_value_head_dim": 16, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
}


def build_config(smoke: bool) -> Any:
    from transformers import Qwen3_5TextConfig

    return Qwen3_5TextConfig(**(SMOKE if smoke else QWEN3_5_9B))


def build_model(smoke: bool, device: str | None = None) -> Any:
    """LoRA over all linear layers of a random model; `device="meta"` allocates nothing (for counting)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3_5ForCausalLM

    config = build_config(smoke)
    if device is None:
        device = "cpu" if smoke else "cuda"
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    config._attn_implementation = "sdpa"
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # built in bf16 straight away: no fp32 copy of 9B weights
    try:
        with torch.device(device):
            model = Qwen3_5ForCausalLM(config)
    finally:
        torch.set_default_dtype(default)
    model.activation_checkpointing_enable({"use_reentrant": False})
    model.enable_input_require_grads()
    model.config.use_cache = False
    lora = LoraConfig(r=32, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM")
    return get_peft_model(model, lora), device


def shape(model: Any) -> dict[str, Any]:
    """What the dry run prints: the configuration that matters for memory and speed, and parameter counts."""
    config = model.config
    lora = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules() if hasattr(module, "lora_A")})
    return {
        "layers": config.num_hidden_layers, "hidden": config.hidden_size, "intermediate": config.intermediate_size,
        "vocab": config.vocab_size,
        "layer_types": {t: config.layer_types.count(t) for t in sorted(set(config.layer_types))},
        "full_attention": f"{config.num_attention_heads} heads x {config.head_dim}, {config.num_key_value_heads} kv",
        "linear_attention": f"{config.linear_num_key_heads} key heads x {config.linear_key_head_dim}, "
                            f"{config.linear_num_value_heads} value heads x {config.linear_value_head_dim}, "
                            f"conv {config.linear_conv_kernel_dim}",
        "parameters": sum(p.numel() for p in model.parameters() if not p.requires_grad),  # the frozen base
        "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),  # LoRA
        "lora_targets": lora,
    }


def measure(model: Any, device: str, length: int, steps: int, vocab: int) -> dict[str, Any]:
    import torch

    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-4)
    ids = torch.randint(0, vocab, (1, length), device=device)
    labels = ids.clone()
    labels[:, : length // 2] = -100  # context half, trained half

    def step() -> None:
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    try:
        step()  # warm-up: kernels, allocator, optimizer state
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(steps):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
    except torch.OutOfMemoryError:
        return {"length": length, "error": "out of memory"}
    seconds = time.perf_counter() - started
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else 0.0
    return {"length": length, "tokens_per_s": length * steps / seconds, "step_s": seconds / steps,
            "peak_memory_gb": peak}


def main() -> None:
    parser = command_line(__doc__, steps=3)
    parser.add_argument("--lengths", default="8192,32768,65536")
    parser.add_argument("--smoke", action="store_true", help="tiny model on the CPU: checks the script runs")
    parser.add_argument("--dry-run", action="store_true", help="build on the meta device; print shape and counts")
    a = parser.parse_args()
    if a.dry_run:
        model, _ = build_model(a.smoke, device="meta")
        info = shape(model)
        if printed_as_json(info, a.json):
            return
        for key, value in info.items():
            print(f"{key}: {value:,}" if isinstance(value, int) else f"{key}: {value}")
        return
    lengths = [int(x) for x in a.lengths.split(",")] if not a.smoke else [128, 256]
    model, device = build_model(a.smoke)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    results = [measure(model, device, n, a.steps if not a.smoke else 1, model.config.vocab_size) for n in lengths]
    report = {"device": device, "parameters": total, "trainable": trainable, "results": results}
    if printed_as_json(report, a.json):
        return
    print(f"{device}: {total / 1e9:.2f} B parameters, {trainable / 1e6:.1f} M trainable (LoRA r32)")
    for r in results:
        if "error" in r:
            print(f"{r['length']:>6} tokens/row: {r['error']}")
        else:
            print(f"{r['length']:>6} tokens/row: {r['tokens_per_s']:9.0f} tok/s, {r['step_s']:.2f} s/step, "
                  f"peak {r['peak_memory_gb']:.1f} GB")


if __name__ == "__main__":
    main()
