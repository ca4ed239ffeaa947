"""`rescue simulate --out DIR`: `simulation.html`, the simulator's result at the level of the collection
report: the settings it ran with, every method's numbers beside the published figures, and each sweep as a
chart whose axis fits its curves, every curve labelled at its end and keyed by colour and dash, with the
numbers in a table under it."""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

from unscaffold.iojson import write_text_atomic
from unscaffold.rescue.simulate import Simulation

COLOURS = ["#4c7bd9", "#d9534c", "#3a9d5d", "#c48a1c", "#8a4cd9", "#555555"]
DASHES = ["", "6 3", "2 3", "8 3 2 3", "1 2", "4 4"]
# Harness-S (AppWorld) figures a method of the simulator stands for; None: the paper gives none.
PUBLISHED = {"grpo": "64.69%", "same_harness": "70.94%", "random": None, "rule": None, "adaptive": "79.38%"}
PUBLISHED_SUCCESS = {"random": "18-25%", "rule": "27-44%", "adaptive": "46-67%"}
STYLE = ("body{font-family:sans-serif;margin:2em;max-width:60em} table{border-collapse:collapse;margin:.5em 0 1.5em}"
         "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right} td:first-child,th:first-child"
         "{text-align:left} .muted{color:#666}")


def axis(lo: float, hi: float, ticks: int = 8) -> tuple[float, float, float]:
    """A rounded (low, high, step) around [lo, hi] for about `ticks` gridlines, so near curves stay apart."""
    if hi <= lo:
        lo, hi = lo - 0.05, hi + 0.05
    raw = (hi - lo) / (ticks - 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return round(math.floor(lo / step) * step, 12), round(math.ceil(hi / step) * step, 12), step


def curve_chart(title: str, series: dict[str, list[tuple[float, float]]], x_label: str, y_label: str) -> str:
    """Curves over a shared x axis, y fitted to the data with labelled gridlines; each curve has its own
    colour and dash, a dot per point, its name at its right end and in the key under the chart."""
    points = [p for pts in series.values() for p in pts]
    if not points:
        return ""
    w, h, left, top, right = 460, 220, 52, 28, 150
    xs = sorted({p[0] for p in points})
    x_lo, x_hi = xs[0], xs[-1]
    y_lo, y_hi, y_step = axis(min(p[1] for p in points), max(p[1] for p in points))

    def x_of(x: float) -> float:
        return left + w * (x - x_lo) / ((x_hi - x_lo) or 1.0)

    def y_of(y: float) -> float:
        return top + h - h * (y - y_lo) / (y_hi - y_lo)

    parts = [f'<text x="0" y="16" font-size="14" font-weight="600">{escape(title)}</text>']
    n = round((y_hi - y_lo) / y_step)
    for i in range(n + 1):
        y = y_lo + i * y_step
        parts.append(f'<line x1="{left}" y1="{y_of(y):.1f}" x2="{left + w}" y2="{y_of(y):.1f}" stroke="#e4e4e4"/>'
                     f'<text x="{left - 6}" y="{y_of(y) + 4:.1f}" font-size="11" text-anchor="end">{y:.3g}</text>')
    for x in xs:
        parts.append(f'<text x="{x_of(x):.1f}" y="{top + h + 16}" font-size="11" text-anchor="middle">{x:g}</text>')
    parts.append(f'<text x="{left + w / 2:.0f}" y="{top + h + 34}" font-size="12" text-anchor="middle">'
                 f'{escape(x_label)}</text><text x="12" y="{top + h / 2:.0f}" font-size="12" text-anchor="middle" '
                 f'transform="rotate(-90 12 {top + h / 2:.0f})">{escape(y_label)}</text>')
    ends: list[tuple[float, str, str]] = []
    for i, (name, pts) in enumerate(series.items()):
        colour, dash = COLOURS[i % len(COLOURS)], DASHES[i % len(DASHES)]
        ordered = sorted(pts)
        path = " ".join(f"{x_of(x):.1f},{y_of(y):.1f}" for x, y in ordered)
        dashing = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(f'<g><title>{escape(name)}</title><polyline fill="none" stroke="{colour}" stroke-width="2"'
                     f'{dashing} points="{path}"/>'
                     + "".join(f'<circle cx="{x_of(x):.1f}" cy="{y_of(y):.1f}" r="3" fill="{colour}">'
                               f'<title>{escape(name)}: {x:g} -> {y:.3f}</title></circle>' for x, y in ordered)
                     + "</g>")
        ends.append((y_of(ordered[-1][1]), name, colour))
    placed = -1e9
    for y, name, colour in sorted(ends):  # names at the curves' ends, pushed apart where curves meet
        placed = max(y + 4, placed + 13)
        parts.append(f'<text x="{left + w + 8}" y="{placed:.1f}" font-size="12" fill="{colour}">{escape(name)}</text>')
    key_y = top + h + 56
    for i, name in enumerate(series):
        colour, dash = COLOURS[i % len(COLOURS)], DASHES[i % len(DASHES)]
        kx = left + (i % 3) * 170
        ky = key_y + (i // 3) * 18
        dashing = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(f'<line x1="{kx}" y1="{ky - 4}" x2="{kx + 28}" y2="{ky - 4}" stroke="{colour}" '
                     f'stroke-width="2"{dashing}/><text x="{kx + 34}" y="{ky}" font-size="12">{escape(name)}</text>')
    height = key_y + 18 * ((len(series) + 2) // 3)
    return (f'<svg class="plot" width="{left + w + right}" height="{height}" role="img" '
            f'aria-label="{escape(title)}">{"".join(parts)}</svg>')


def table_html(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def simulation_page(result: Simulation, path: Path) -> Path:
    """The whole page: settings, the methods' numbers with the published ones, one chart and table a sweep."""
    knobs = result.knobs.model_dump()
    settings = table_html(["setting", "value"], [["seed", str(result.seed)]]
                      + [[k, f"{v:g}" if isinstance(v, float) else str(v)] for k, v in knobs.items()])
    methods = table_html(
        ["method", "effective group rate", "published", "rescue success", "published", "extra rollouts %",
         "final base success"],
        [[m, f"{r.effective_group_rate:.3f}", PUBLISHED.get(m) or "-", f"{r.rescue_success_rate:.3f}",
          PUBLISHED_SUCCESS.get(m, "-"), f"{r.extra_rollout_pct:.1f}", f"{r.final_base_success:.3f}"]
         for m, r in result.methods.items()])
    sections = []
    for knob, points in result.sweeps.items():
        names = list(points[0].effective_group_rate) if points else []
        series = {m: [(p.value, p.effective_group_rate[m]) for p in points] for m in names}
        chart = curve_chart(f"effective group rate as {knob} moves", series, knob, "effective group rate")
        rows = [[f"{p.value:g}", *[f"{p.effective_group_rate[m]:.3f}" for m in names],
                 "holds" if p.ordering_holds else "BREAKS"] for p in points]
        sections.append(f"<h2>{escape(knob)}</h2>{chart}"
                        + table_html([knob, *names, "adaptive > same_harness > grpo"], rows))
    ordering = "holds" if result.ordering_holds else "BREAKS"
    write_text_atomic(path, (
        "<!doctype html><meta charset='utf-8'><title>rescue simulator</title>"
        f"<style>{STYLE}</style><h1>rescue simulator</h1>"
        "<p class='muted'>Synthetic success probabilities, not training: a check of whether a sibling pool with "
        "these properties would pay before spending GPUs on it. Published figures: Harness-S, <i>Learning from "
        "Sibling Harnesses for Generalizable Agent Training</i> (AppWorld); the simulator's router quality and "
        "transfer are its inputs, so rule against adaptive follows from them.</p>"
        f"<h2>settings</h2>{settings}<h2>methods at these settings</h2>{methods}"
        f"<p>ordering adaptive &gt; same_harness &gt; grpo at these settings: <b>{ordering}</b></p>"
        + "".join(sections)))
    return path
