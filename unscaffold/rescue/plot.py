"""Self-contained HTML pages of inline SVG: rescue training metrics per step (the simulator's page:
sim_page.py)."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from unscaffold.iojson import write_text_atomic

COLOURS = ["#4c7bd9", "#d9534c", "#3a9d5d", "#c48a1c", "#8a4cd9", "#555555"]


def line_chart(title: str, series: dict[str, list[tuple[float, float]]], y_max: float = 1.0,
               x_label: str = "step") -> str:
    """Lines over a shared x axis, y from 0 to y_max, with a legend."""
    points = [p for s in series.values() for p in s]
    if not points:
        return ""
    w, h, left, top = 420, 200, 40, 24
    x_lo, x_hi = min(p[0] for p in points), max(p[0] for p in points)
    span = (x_hi - x_lo) or 1.0

    def xy(p: tuple[float, float]) -> str:
        return f"{left + w * (p[0] - x_lo) / span:.1f},{top + h - h * min(p[1], y_max) / y_max:.1f}"

    parts = [f'<text x="0" y="14" font-size="13" font-weight="600">{escape(title)}</text>',
             f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" stroke="#999"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + h}" stroke="#999"/>',
             f'<text x="2" y="{top + 10}" font-size="11">{y_max:g}</text>',
             f'<text x="2" y="{top + h}" font-size="11">0</text>',
             f'<text x="{left}" y="{top + h + 16}" font-size="11">{x_lo:g}</text>',
             f'<text x="{left + w - 30}" y="{top + h + 16}" font-size="11">{x_hi:g} {escape(x_label)}</text>']
    for i, (name, pts) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
                     f'points="{" ".join(xy(p) for p in sorted(pts))}"/>')
        parts.append(f'<text x="{left + w + 10}" y="{top + 14 + 16 * i}" font-size="12" fill="{colour}">'
                     f'{escape(name)}</text>')
    return (f'<svg class="plot" width="{left + w + 170}" height="{top + h + 24}" role="img" '
            f'aria-label="{escape(title)}">{"".join(parts)}</svg>')


def write_page(path: Path, title: str, charts: list[str]) -> Path:
    body = "".join(f"<div>{c}</div>" for c in charts if c)
    write_text_atomic(path, f"<!doctype html><meta charset='utf-8'><title>{escape(title)}</title>"
                      f"<style>body{{font-family:sans-serif;margin:2em}} svg{{margin:1em 0}}</style>"
                      f"<h1>{escape(title)}</h1>{body}")
    return path


def write_training_plot(lines: list[dict[str, Any]], path: Path) -> Path:
    def series(key: str) -> list[tuple[float, float]]:
        return [(line["step"], line[key]) for line in lines]

    return write_page(path, "rescue GRPO", [
        line_chart("effective group rate", {"after rescue": series("effective_group_rate"),
                                            "plain GRPO (before rescue)": series("base_effective_group_rate")}),
        line_chart("rescue success rate and base preference", {"rescue success": series("rescue_success_rate"),
                                                                "router prefers base": series("base_preferred_rate")}),
        line_chart("extra rollouts (% of GRPO)", {"extra rollouts": series("extra_rollout_pct")}, y_max=100.0),
    ])

