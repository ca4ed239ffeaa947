"""`rescue train`'s `metrics.html`: the run at the level of the collection report: whether anything was
trained, its settings, the summary beside the published figures' names, loss and reward, and every step's
numbers, each chart's curves named at their ends (the simulator's page: sim_page.py)."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from unscaffold.iojson import write_text_atomic
from unscaffold.pages.charts import curve_chart
from unscaffold.pages.document import page, table_html

SETTINGS = ("model", "suite", "router", "k", "top_k", "max_steps", "tasks_per_step", "steps_per_generation",
            "learning_rate", "temperature", "max_turns", "max_completion_length", "lora_r", "lora_alpha", "seed",
            "init_adapter", "pool")
SUMMARY = (("optimiser steps", "steps", "{:g}"), ("generation batches", "generation_batches", "{:g}"),
           ("effective group rate (after rescue)", "effective_group_rate", "{:.3f}"),
           ("effective group rate of plain GRPO", "base_effective_group_rate", "{:.3f}"),
           ("rescued groups", "rescued_groups", "{:g}"), ("rescue success rate", "rescue_success_rate", "{:.3f}"),
           ("training rollouts", "rollouts", "{:g}"), ("extra rollouts, % of GRPO's", "extra_rollout_pct", "{:.1f}"),
           ("seconds", "wall_s", "{:.0f}"))
STEP_COLUMNS = (("step", "step", "{:g}"), ("groups", "groups", "{:g}"), ("rescued", "rescued_groups", "{:g}"),
                ("effective rate", "effective_group_rate", "{:.3f}"),
                ("plain GRPO rate", "base_effective_group_rate", "{:.3f}"),
                ("rescue success", "rescue_success_rate", "{:.3f}"), ("rollouts", "rollouts", "{:g}"),
                ("extra %", "extra_rollout_pct", "{:.1f}"), ("mean reward", "mean_reward", "{:.3f}"))


def _cell(value: Any, form: str) -> str:
    if value is None:
        return "-"
    try:
        return form.format(value)
    except (TypeError, ValueError):
        return str(value)


def _trl_log(path: Path | None) -> list[dict[str, Any]]:
    if path is None or not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and "step" in row:
            out.append(row)
    return out


def write_training_plot(lines: list[dict[str, Any]], path: Path, summary: dict[str, Any] | None = None,
                        settings: dict[str, Any] | None = None, trl_log: Path | None = None) -> Path:
    summary, settings = summary or {}, settings or {}

    def series(key: str, rows: list[dict[str, Any]] = lines) -> list[tuple[float, float]]:
        return [(float(r["step"]), float(r[key])) for r in rows if isinstance(r.get(key), int | float)]

    logged = _trl_log(trl_log)
    method = summary.get("method") or settings.get("router") or ""
    suite = summary.get("suite")
    title = "rescue GRPO" + (f": {method}" if method else "") + (f" on {suite}" if suite else "")
    parts = [f"<h1>{escape(title)}</h1>"]
    if summary.get("trained") is False:
        parts.append(f'<p class="warn">not trained: '
                     f'{escape(str(summary.get("not_trained_reason") or "no update moved the weights"))}; '
                     "`compare` does not rank this run</p>")
    parts.append("<h2>summary</h2>" + table_html(["figure", "value"], [
        [name, _cell(summary.get(key), form)] for name, key, form in SUMMARY if key in summary]))
    for note in summary.get("notes") or []:
        parts.append(f'<p class="muted">{escape(str(note))}</p>')
    shown = [[k, str(settings[k])] for k in SETTINGS if settings.get(k) is not None]
    if shown:
        parts.append("<h2>settings</h2>" + table_html(["setting", "value"], shown))
    parts.append("<h2>per step</h2>")
    charts = [
        curve_chart("effective group rate", {"after rescue": series("effective_group_rate"),
                                             "plain GRPO (before rescue)": series("base_effective_group_rate")},
                    "optimiser step", "share of groups"),
        curve_chart("rescue success and the router's preference", {
            "rescue success": series("rescue_success_rate"), "prefers base": series("base_preferred_rate"),
            "undecided": series("base_undecided_rate")}, "optimiser step", "share"),
        curve_chart("extra rollouts", {"extra rollouts": series("extra_rollout_pct")}, "optimiser step",
                    "% of plain GRPO's"),
        curve_chart("loss and reward (TRL's log)", {"loss": series("loss", logged),
                                                    "mean reward": series("reward", logged)},
                    "optimiser step", "value"),
    ]
    parts += [f"<div>{c}</div>" for c in charts if c]
    parts.append(table_html([name for name, _, _ in STEP_COLUMNS],
                            [[_cell(r.get(key), form) for _, key, form in STEP_COLUMNS] for r in lines]))
    write_text_atomic(path, page(title, "".join(parts)))
    return path
