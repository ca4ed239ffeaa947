"""The rows both the terminal and the HTML page show, built once so the two never disagree."""

from __future__ import annotations

from unscaffold.behaviors.compare import Comparison
from unscaffold.behaviors.recovery import BehaviorRow, PooledRecovery, RecoveryTable

Grid = tuple[list[str], list[list[str]]]
SCORE_NAMES = {"pass_at_1": "pass@1", "avg_at_k": "Avg@k", "pass_at_k": "Pass@k", "tgc": "TGC", "sgc": "SGC"}


def _rate(row: BehaviorRow) -> str:
    return "-" if row.rate is None else f"{row.rate:.1f}%"


def status(row: BehaviorRow) -> str:
    """A behaviour no training row shows was never taught: its rate says nothing about learning."""
    if row.taught == 0:
        return "never taught"
    if not row.eligible:
        return "-"
    if row.recovered == row.eligible:
        return "recovered"
    return "not recovered" if row.recovered == 0 else "partly recovered"


def decided_by(row: BehaviorRow) -> str:
    """Which reading decided the row's trials: `evidence`, `text`, or both with their trial counts."""
    kinds = {k: n for k, n in row.decided_by.items() if n}
    if len(kinds) <= 1:
        return next(iter(kinds), "-")
    return " / ".join(f"{k} {n}" for k, n in sorted(kinds.items()))


def behavior_grid(rows: list[BehaviorRow]) -> Grid:
    headers = ["behaviour", "component", "decided by", "eligible", "recovered", "rate"]

    def cells(r: BehaviorRow) -> list[str]:
        return [r.behavior, ", ".join(r.components or [r.component]), decided_by(r), str(r.eligible),
                str(r.recovered), _rate(r)]
    if not any(r.taught is not None for r in rows):
        return headers, [cells(r) for r in rows]
    return ([*headers, "training rows showing it", "status"], [[*cells(r), _int(r.taught), status(r)] for r in rows])


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def mean_lines(table: RecoveryTable) -> list[str]:
    """One suite's mean: the published figure is a pooled mean over three domains, so it is not shown here."""
    lines = [f"mean recovery ({table.suite}): {_pct(table.mean)} over {len(table.behaviors)} behaviour(s) with at "
             f"least {table.min_eligible} eligible task(s)"]
    if table.excluded:
        runs = ", ".join(f"{role} {len(tasks)}" for role, tasks in table.excluded_by_run.items())
        lines.append(f"excluded: {len(table.excluded)} task(s) without a completed trial (infrastructure or "
                     f"environment failures; {runs}), counted in no behaviour")
    lines.append(f"rule: {table.rule_text} ({table.rule})")
    if table.taught is not None:
        never = [c for c, n in table.taught.counts.items() if n == 0]
        lines.append(f"training rows: {table.taught.rows} ({table.taught.data}), counted with the same detectors; "
                     f"never taught (no row shows it): {', '.join(never) or 'none'}")
    return lines


def pooled_lines(report: PooledRecovery) -> list[str]:
    """The pooled mean over every kept behaviour of all suites, and beside it the published figure."""
    per_suite = ", ".join(f"{suite} {_pct(mean)}" for suite, mean in report.suite_means.items())
    published = report.published
    return [f"per-suite means: {per_suite}",
            f"pooled mean recovery ({len(report.suites)} suites): {_pct(report.mean)} over {report.behaviors} "
            f"behaviour(s); published: {published.mean:.1f}% ({published.source})",
            f"excluded: {report.excluded} task(s) without a completed trial, over all suites"]


def _int(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def score_grid(cmp: Comparison) -> Grid:
    names = [k for k in SCORE_NAMES if any(k in r.scores for r in cmp.runs)]
    ks = {r.k for r in cmp.runs}
    at = f"@{next(iter(ks))}" if len(ks) == 1 else "@k"
    shown = {k: SCORE_NAMES[k].replace("@k", at) for k in names}
    headers = ["run", "model", *[f"{shown[k]} [95% CI]" for k in names], "Δ pass@1 vs baseline [95% CI]",
               "better / worse / same", "marks"]
    rows = []
    for r in cmp.runs:
        vs = r.vs_baseline
        training = r.what.training
        method = f" ({training.recipe}: {training.method})" if training and training.method else ""
        versus = ("not trained" if not r.ranked else "baseline" if r.run == cmp.baseline
                  else "-" if vs is None else vs.diff.text(signed=True))
        rows.append([r.label, r.what.model + (f" + {r.what.adapter}" if r.what.adapter else "") + method,
                     *[r.scores[k].text() if k in r.scores else "-" for k in names], versus,
                     "" if vs is None else f"{vs.better} / {vs.worse} / {vs.same}", "; ".join(r.marks) or "-"])
    return headers, rows


def _tokens(tokens: dict[str, int]) -> str:
    return f"{tokens.get('input', 0):,} / {tokens.get('output', 0):,}"


def cost_grid(cmp: Comparison) -> Grid:
    """The evaluation's own cost, then the training's in the same units for both recipes (the distilled row
    with its collection's reviewer calls and rollouts, the rescue row with every rollout it sampled)."""
    headers = ["run", "student rollouts", "student calls", "student tokens in / out", "reviewer calls",
               "reviewer tokens in / out", "cost", "wall", "training rollouts (collection / base / rescue / filler / "
               "re-anchor / validation)", "training reviewer calls / replacements", "training reviewer tokens in / "
               "out", "router calls", "router tokens in / out", "optimiser steps", "generation batches",
               "training CPU s", "training GPU s", "training wall"]
    rows = []
    for r in cmp.runs:
        c, t = r.cost, r.cost.training
        evaluation = [r.label, f"{c.student_rollouts:,}", f"{c.student_calls:,}", _tokens(c.student_tokens),
                      f"{c.reviewer_calls:,}", _tokens(c.reviewer_tokens), f"${c.cost_usd:.4f}",
                      f"{c.wall_time_s:.1f}s"]
        if t is None:
            rows.append([*evaluation, _int(c.rollouts), "-", "-", "-", "-", _int(c.training_steps), "-", "-", "-",
                         "-" if c.training_wall_s is None else f"{c.training_wall_s:.1f}s"])
            continue
        n = t.rollouts
        rows.append([*evaluation, f"{n.total:,} ({n.collection} / {n.base} / {n.rescue} / {n.filler} / {n.reanchor} / "
                     f"{n.validation})", f"{t.reviewer_calls:,} / {t.replacements:,}", _tokens(t.reviewer_tokens),
                     f"{t.router_calls:,}", _tokens(t.router_tokens), f"{t.optimiser_steps:,}",
                     f"{t.generation_batches:,}", f"{t.cpu_s:.1f}", f"{t.gpu_s:.1f}", f"{t.wall_s:.1f}s"])
    return headers, rows


def _pct2(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}%"


def ablation_grid(cmp: Comparison) -> Grid:
    """Distilled runs by the source of their rows, each beside the published figure(s) for that source."""
    headers = ["run", "rows from", "pass@1", "published"]
    rows = [[a.run, a.source, f"{a.pass_at_1:.1f}", "; ".join(f"{what} {value:.1f}" for what, value in a.published)]
            for a in cmp.ablation]
    return headers, rows


def rescue_grid(cmp: Comparison) -> Grid:
    """Our rescue-trained runs' training figures, each beside the published figure of its method."""
    headers = ["run", "method", "published method", "effective groups", "published", "extra rollouts",
               "published", "training rollouts", "published setup"]
    rows = []
    for m in cmp.rescue_methods:
        p = m.published
        rows.append([m.run, m.method, p.method if p else "-", _pct2(m.effective_group_rate),
                     _pct2(p.effective_group_rate) if p else "-", _pct2(m.extra_rollout_pct),
                     _pct2(p.extra_rollout_pct) if p else "-", _int(m.rollouts),
                     p.setup if p else f"none shown: {m.published_note}"])
    return headers, rows


def seed_grid(cmp: Comparison) -> Grid:
    """Trained runs repeated with other training seeds: Avg@k and Pass@k as means over the seeds."""
    headers = ["runs", "seeds", "k", "Avg@k over seeds [95% CI]", "Pass@k over seeds [95% CI]"]
    return headers, [[g.label, ", ".join(str(s) for s in g.seeds), str(g.k), g.avg_at_k.text(),
                      g.pass_at_k.text() if g.pass_at_k else "-"] for g in cmp.seed_groups]
