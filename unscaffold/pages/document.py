"""The page frame every report uses: one stylesheet, cards for headline figures, tables with numbers aligned."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2330;background:#fafbfc}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px} .muted{color:#667}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin:14px 0}
.card{background:#fff;border:1px solid #dde2ea;border-radius:8px;padding:10px 14px;min-width:120px}
.card b{display:block;font-size:20px}
.plots{display:flex;gap:24px;flex-wrap:wrap}
.ok{color:#17803d} .bad{color:#b42318} .warn{color:#b42318;font-weight:600}
pre{white-space:pre-wrap;word-break:break-word;background:#f4f6f9;border-radius:6px;padding:6px 8px;margin:4px 0}
table{border-collapse:collapse;background:#fff;margin:8px 0 16px}
th,td{border:1px solid #dde2ea;padding:4px 8px;text-align:left;font-size:13px} th{background:#f0f3f7}
td.num{text-align:right;font-variant-numeric:tabular-nums}
"""


def page(title: str, body: str, *, css: str = "", script: str = "") -> str:
    """A whole self-contained document: the shared stylesheet (plus a page's own rules), then the body."""
    tail = f"<script>{script}</script>" if script else ""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{CSS}{css}</style></head><body>{body}{tail}</body></html>")


def card_html(name: str, value: str) -> str:
    return f'<div class="card"><span class="muted">{escape(name)}</span><b>{escape(value)}</b></div>'


def cards_html(items: Sequence[tuple[str, object]]) -> str:
    return f'<div class="cards">{"".join(card_html(name, str(value)) for name, value in items)}</div>'


def table_html(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric_from: int = 1) -> str:
    """Columns from `numeric_from` on are right-aligned figures; cells are escaped text."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td{" class=num" if i >= numeric_from else ""}>{escape(c)}</td>'
                                   for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
