"""Inline-SVG charts for the reports: horizontal bars, and curves over a shared axis fitted to the data."""

from __future__ import annotations

import math
from html import escape

COLOURS = ["#4c7bd9", "#d9534c", "#3a9d5d", "#c48a1c", "#8a4cd9", "#555555"]
DASHES = ["", "6 3", "2 3", "8 3 2 3", "1 2", "4 4"]
LABEL_CHARS = 64  # a chart label longer than this is cut, with the whole of it as the hover text
CHAR_PX = 7  # width of a character of a 12 px sans-serif label, about


def label_width(labels: list[str]) -> int:
    """Room for the longest label (up to LABEL_CHARS characters), at least 170 px."""
    return max(170, CHAR_PX * min(LABEL_CHARS, max((len(label) for label in labels), default=0)) + 12)


def chart_label(label: str) -> str:
    """A chart's row label, whole where it fits, else cut with `…` and whole in its hover title."""
    shown = label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "…"
    return f"<title>{escape(label)}</title>{escape(shown)}" if shown != label else escape(shown)


def bar_chart(title: str, items: list[tuple[str, float]], maximum: float | None = None, fmt: str = "{:.2f}") -> str:
    """A horizontal bar chart as inline SVG."""
    if not items:
        return ""
    top = maximum or max(v for _, v in items) or 1.0
    row, bar_w = 20, 260
    label_w = label_width([label for label, _ in items])
    height = row * len(items) + 30
    bars = []
    for i, (label, value) in enumerate(items):
        y = 24 + i * row
        w = 0 if top == 0 else bar_w * value / top
        bars.append(
            f'<text x="0" y="{y + 13}" font-size="12">{chart_label(label)}</text>'
            f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{row - 6}" fill="#4c7bd9"></rect>'
            f'<text x="{label_w + w + 4:.1f}" y="{y + 13}" font-size="12">{escape(fmt.format(value))}</text>'
        )
    return (f'<svg class="plot" width="{label_w + bar_w + 60}" height="{height}" role="img" '
            f'aria-label="{escape(title)}"><text x="0" y="14" font-size="13" font-weight="600">{escape(title)}</text>'
            f'{"".join(bars)}</svg>')


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
