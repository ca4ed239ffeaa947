"""`train-sft` throughput against a plain TRL SFTTrainer (`messages` rows, `assistant_only_loss`), same process.

Both train the same LoRA (r32, all linear layers) on the same synthetic multi-turn rows of the tiny model,
one epoch with batch 8, and are timed around `trainer.train()` alone; data preparation (our rendering and
masks, TRL's tokenisation) is timed separately. Printed: trained tokens per second of each and their ratio
(target >= 1.0), and the peak memory of each run (the CUDA allocator's peak on a GPU; on CPUs the rise of
the resident set over its level before the run, sampled every 5 ms).

The trained token counts differ a little by design: TRL's `{% generation %}` span also covers the
`<think>\\n` the generation prompt already holds and the newline after the end-of-turn token, so on the
same sequences at the same speed the trained-tokens ratio is about 0.96; the train-time ratio (same
sequences, same steps) is printed beside it. The runs alternate `--repeats` times (TRL first) and the
fastest of each counts, since other processes on a shared machine make single timings noisy.

Run: `.venv/bin/python -m perf.sft_throughput [--rows 64] [--turns 6] [--repeats 2] [--json]`."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from perf.common import command_line, printed_as_json
from unscaffold.minimal_harness.tool import EXECUTE_TOOL, system_prompt
from unscaffold.offline.tiny import build_tiny_model, tiny_model_dir
from unscaffold.sft.config import TrainConfig
from unscaffold.sft.train import train_sft

BATCH = 8


def synthetic_rows(n: int, turns: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt()},
                                          {"role": "user", "content": f"Task {i}: total column B of data.csv."}]
        for t in range(turns):
            command = f"python3 -c 'import csv; print(sum(float(r[1]) for r in csv.reader(open(\"d{t}.csv\"))))'"
            messages.append({"role": "assistant", "content": "", "reasoning_content": f"Step {t}: read part {t}.",
                             "tool_calls": [{"id": f"call_{t}", "type": "function",
                                             "function": {"name": "execute", "arguments": {"command": command}}}]})
            messages.append({"role": "tool", "tool_call_id": f"call_{t}", "name": "execute",
                             "content": f"{i * t}.5\n" * 20 + "[exit_code=0]"})
        messages.append({"role": "assistant", "content": f"The total is {i}.", "reasoning_content": "All parts read."})
        rows.append({"messages": messages, "tools": [EXECUTE_TOOL], "masked_reasoning_turns": []})
    return rows


class PeakMemory:
    """Peak memory of one block: CUDA allocator peak, else resident-set rise sampled from /proc."""

    def __init__(self) -> None:
        self.gb = 0.0

    @contextmanager
    def measure(self) -> Iterator[None]:
        import torch

        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
            yield
            self.gb = torch.cuda.max_memory_allocated() / 2**30
            return
        base = _rss()
        peak = [base]
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.005):
                peak[0] = max(peak[0], _rss())

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            self.gb = (max(peak[0], _rss()) - base) / 2**30


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def run_ours(data: Path, out: Path, model: Path, steps: int, batch: int = BATCH) -> dict[str, Any]:
    memory = PeakMemory()
    config = TrainConfig(model=str(model), max_steps=steps, per_device_batch_size=batch, batch_size=batch,
                         gradient_checkpointing=True, save_steps=10_000)
    started = time.perf_counter()
    with memory.measure():
        summary = train_sft(data, out, config, progress=False)
    total = time.perf_counter() - started
    return {"trained_tokens": summary.trained_tokens, "train_s": summary.train_seconds,
            "tokens_per_s": summary.tokens_per_s, "prepare_and_train_s": total, "peak_gb": memory.gb}


def run_trl(rows: list[dict[str, Any]], out: Path, model: Path, steps: int, batch: int = BATCH,
            chat_template: str | None = None) -> dict[str, Any]:
    """TRL's SFTTrainer on `messages` rows with `assistant_only_loss`; `chat_template` replaces the
    tokenizer's (a `{% generation %}` training variant where the model's own template has no markers)."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    memory = PeakMemory()
    started = time.perf_counter()
    with memory.measure():
        args = SFTConfig(output_dir=str(out), max_steps=steps, per_device_train_batch_size=batch,
                         gradient_accumulation_steps=1, learning_rate=2e-4, lr_scheduler_type="cosine_with_min_lr",
                         lr_scheduler_kwargs={"min_lr": 1e-6}, warmup_steps=0.05, seed=42,
                         activation_checkpointing=True, activation_checkpointing_kwargs={"use_reentrant": False},
                         assistant_only_loss=True, max_length=None, report_to=[], disable_tqdm=True,
                         save_strategy="no", logging_steps=1, bf16=torch.cuda.is_available(),
                         use_cpu=not torch.cuda.is_available())
        dataset = Dataset.from_list([{"messages": r["messages"], "tools": r["tools"]} for r in rows])
        tokenizer = AutoTokenizer.from_pretrained(model)
        if chat_template is not None:
            tokenizer.chat_template = chat_template
        trainer = SFTTrainer(model=AutoModelForCausalLM.from_pretrained(model), args=args, train_dataset=dataset,
                             processing_class=tokenizer,
                             peft_config=LoraConfig(r=32, lora_alpha=32, target_modules="all-linear",
                                                    task_type="CAUSAL_LM"))
        from transformers import PrinterCallback

        trainer.remove_callback(PrinterCallback)
        consumed = steps * batch
        labels = trainer.train_dataset["labels"]
        trained = sum(sum(1 for x in labels[i % len(labels)] if x != -100) for i in range(consumed))
        t0 = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - t0
    total = time.perf_counter() - started
    return {"trained_tokens": trained, "train_s": train_s, "tokens_per_s": trained / train_s,
            "prepare_and_train_s": total, "peak_gb": memory.gb}


def main() -> None:
    a = command_line(__doc__, rows=64, turns=6, repeats=2).parse_args()
    steps = max(1, a.rows // BATCH)
    model = build_tiny_model(tiny_model_dir())
    rows = synthetic_rows(a.rows, a.turns)
    root = Path(tempfile.mkdtemp(prefix="sft-perf-"))
    try:
        data = root / "data.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        trls, ourss = [], []
        for i in range(a.repeats):
            trls.append(run_trl(rows, root / f"trl{i}", model, steps))
            ourss.append(run_ours(data, root / f"ours{i}", model, steps))
        trl = min(trls, key=lambda r: r["train_s"])
        ours = min(ourss, key=lambda r: r["train_s"])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {"rows": a.rows, "steps": steps, "batch": BATCH, "train_sft": ours, "trl_assistant_only_loss": trl,
              "ratio_tokens_per_s": ours["tokens_per_s"] / trl["tokens_per_s"],
              "ratio_train_time": trl["train_s"] / ours["train_s"],
              "ratio_end_to_end": trl["prepare_and_train_s"] / ours["prepare_and_train_s"]}
    if printed_as_json(result, a.json):
        return
    for name, r in (("train-sft", ours), ("TRL assistant_only_loss", trl)):
        print(f"{name:>24}: {r['trained_tokens']:6d} trained tokens in {r['train_s']:.2f} s = "
              f"{r['tokens_per_s']:8.1f} tok/s; with preparation {r['prepare_and_train_s']:.2f} s; "
              f"peak memory {r['peak_gb']:.3f} GB")
    print(f"ratio trained tokens/s (train-sft / TRL): {result['ratio_tokens_per_s']:.2f}  (target >= 1.0)")
    print(f"ratio train time on the same sequences (TRL / train-sft): {result['ratio_train_time']:.2f}")
    print(f"ratio end to end (TRL time / train-sft time): {result['ratio_end_to_end']:.2f}")


if __name__ == "__main__":
    main()
