"""`unscaffold inspect-sft`, `train-sft` and `merge`: from build-sft rows to an adapter and merged weights."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.table import Table
from rich.text import Text

from unscaffold.cli_options import argument, command_from_model, option, setting_argument, switch
from unscaffold.command_settings import InspectSftSettings, MergeSettings
from unscaffold.console import out_console
from unscaffold.errors import InputError
from unscaffold.sft.config import TrainConfig
from unscaffold.terminal_text import clean

TRAINED_OPEN, TRAINED_CLOSE = "⟦", "⟧"  # around each trained span; characters no chat template uses


def inspect_sft_command(s: InspectSftSettings, values: dict[str, Any]) -> None:
    """Show a row exactly as the loss sees it: trained spans marked, context plain."""
    data, model, row, as_json, split_turns = s.data, s.model, s.row, s.as_json, s.split_turns
    from unscaffold.sft.data import parse_row
    from unscaffold.sft.render import RenderError, render_row, segments
    from unscaffold.sft.train import load_tokenizer

    parsed = parse_row(_nth_row(data, row), str(data), f"row {row}")
    tokenizer = load_tokenizer(model)
    try:
        samples, split = render_row(parsed.messages, parsed.tools, tokenizer, parsed.masked_reasoning_turns,
                                    split_turns=split_turns, context_turns=parsed.context_turns)
    except RenderError as e:
        hint = "; use --split-turns" if e.reason == "prefix_property" and not split_turns else ""
        raise InputError(str(data), f"row {row}", f"{e}{hint}") from None
    parts = [segments(tokenizer, s) for s in samples]
    if as_json:  # a row trained turn by turn (--split-turns, or a tokenizer merge) prints one list per sample
        sys.stdout.write(json.dumps(parts if split else parts[0], ensure_ascii=False) + "\n")
        return
    out = out_console()
    if split and not split_turns:
        out.print("[yellow]the tokenizer merges across a turn boundary: this row trains turn by turn")
    for i, (sample, segs) in enumerate(zip(samples, parts, strict=True)):
        if split:
            out.rule(f"sample {i}")
        text = Text()
        for seg in segs:
            if seg["trained"]:  # marked in the text too: a log, a pipe or a colour-blind reader sees no green
                text.append(f"{TRAINED_OPEN}{clean(seg['text'], one_line=False)}{TRAINED_CLOSE}",
                            style="bold green on grey15")
            else:
                text.append(clean(seg["text"], one_line=False), style="dim")
        out.print(text)
        out.print(f"[bold]{len(sample.input_ids)} tokens, {sample.trained_tokens} trained[/bold] "
                  f"(trained spans in green, between {TRAINED_OPEN} and {TRAINED_CLOSE})", highlight=False)


def _nth_row(data: Path, n: int) -> Any:
    try:
        lines = [line for line in data.read_bytes().splitlines() if line.strip()]
    except FileNotFoundError:
        raise InputError(str(data), None, "file not found") from None
    if not 0 <= n < len(lines):
        raise InputError(str(data), "--row", f"{n} is out of range: the file has {len(lines)} rows")
    try:
        return json.loads(lines[n])
    except json.JSONDecodeError as e:
        raise InputError(str(data), f"row {n}", f"invalid JSON: {e.msg}") from None


def train_sft_command(settings: TrainConfig, values: dict[str, Any]) -> None:
    """LoRA SFT on build-sft rows (TRL + PEFT); defaults are the published recipe. Runs under accelerate launch."""
    data, out, resume = values["data"], values["out"], values["resume"]
    if not values["no_preflight"] and not resume:
        from unscaffold.preflight import check_training

        check_training(settings.model)
    from unscaffold.sft.train import train_sft, world  # torch and TRL: after the checks, which need neither

    summary = train_sft(data, out, settings, resume=resume, progress=sys.stderr.isatty())
    if not world()[1]:
        return
    table = Table(title=f"train-sft -> {out}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in ("steps", "trained_tokens", "tokens_per_s", "first_loss", "final_loss", "peak_memory_gb",
                "rows", "rows_used", "rows_split", "samples"):
        value = getattr(summary, key)
        table.add_row(key, f"{value:.4g}" if isinstance(value, float) else str(value))
    for reason, count in summary.rows_dropped.items():
        table.add_row(f"dropped: {reason}", str(count))
    out_console().print(table)
    if summary.rows_dropped.get("prefix_property"):
        first = next(d for d in summary.dropped if d["reason"] == "prefix_property")
        out_console().print(f"[yellow]{summary.rows_dropped['prefix_property']} rows break the prefix property "
                            f"(first: row {first['row']}, turn {first['turn']}); --split-turns trains them turn by "
                            "turn")
    out_console().print(f"adapter and summary: {out}  (evaluate with --student hf:{settings.model}+{out})",
                        highlight=False)


def merge_command(s: MergeSettings, values: dict[str, Any]) -> None:
    """Merge a LoRA adapter into its base model: one checkpoint vLLM or SGLang can serve."""
    adapter, out, base = s.adapter, s.out, s.base
    from unscaffold.sft.merge import merge_adapter

    path = merge_adapter(adapter, out, base)
    out_console().print(f"merged weights: {path}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add the SFT commands to the `unscaffold` command."""
    app.command("inspect-sft")(command_from_model(InspectSftSettings, "inspect-sft", [
        setting_argument(InspectSftSettings, "data", Path)], inspect_sft_command))
    app.command("train-sft")(command_from_model(TrainConfig, "train-sft", [
        argument("data", Path, "DATA.jsonl: build-sft rows or TRL conversational rows."),
        option("out", Path, "Run folder: adapter, train_config.json, train_log.jsonl, summary.json, loss.png, "
               "checkpoints/."),
        switch("resume", "--resume", "Continue from the last checkpoint in --out."),
        switch("no_preflight", "--no-preflight", "Skip the check that the base model's config loads before training."),
    ], train_sft_command))
    app.command("merge")(command_from_model(MergeSettings, "merge", [
        setting_argument(MergeSettings, "adapter", Path)], merge_command))
