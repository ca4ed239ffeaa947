"""Self-contained HTML pages for the behaviour table and the comparison, in the run report's style
(its stylesheet and inline-SVG bar charts): nothing is fetched, the file can be mailed or archived."""

from __future__ import annotations

from html import escape

from unscaffold.behaviors import tables
from unscaffold.behaviors.compare import Comparison
from unscaffold.behaviors.recovery import PooledRecovery, RecoveryTable
from unscaffold.behaviors.stats import Interval
from unscaffold.pages.charts import bar_chart, chart_label, label_width
from unscaffold.pages.document import card_html, page, table_html

ELIGIBILITY = ("A task is <b>eligible</b> for a behaviour when the base model shows it under the training-time "
               "harness h* and does not under the deployment harness h. The <b>rate</b> is the share of eligible "
               "tasks where the trained model shows it under h, with no reviewer and no h*. Each behaviour is "
               "found by a deterministic detector declared beside its h* component.")


def grid_html(grid: tables.Grid, numeric_from: int = 2) -> str:
    headers, rows = grid
    return table_html(headers, rows, numeric_from)


def forest_chart(title: str, items: list[tuple[str, Interval]], low: float, high: float) -> str:
    """Each interval as a line with its point estimate, on one axis from `low` to `high` with a mark at 0."""
    if not items:
        return ""
    row, axis_w = 22, 300
    label_w = label_width([label for label, _ in items])

    def x(v: float) -> float:
        return label_w + axis_w * (min(max(v, low), high) - low) / (high - low)

    height = row * len(items) + 44
    zero = (f'<line x1="{x(0):.1f}" y1="20" x2="{x(0):.1f}" y2="{height - 20}" stroke="#99a" '
            'stroke-dasharray="3,3"></line>') if low < 0 < high else ""
    marks, signed = [], low < 0
    for i, (label, iv) in enumerate(items):
        y = 32 + i * row
        marks.append(f'<text x="0" y="{y + 4}" font-size="12">{chart_label(label)}</text>'
                     f'<line x1="{x(iv.low):.1f}" y1="{y}" x2="{x(iv.high):.1f}" y2="{y}" stroke="#4c7bd9" '
                     f'stroke-width="2"></line><circle cx="{x(iv.value):.1f}" cy="{y}" r="4" fill="#1d2330"></circle>'
                     f'<text x="{label_w + axis_w + 8}" y="{y + 4}" font-size="12">{escape(iv.text(signed))}</text>')
    axis = (f'<text x="{label_w}" y="{height - 4}" font-size="11">{low:g}</text>'
            f'<text x="{label_w + axis_w - 20}" y="{height - 4}" font-size="11">{high:g}</text>')
    return (f'<svg class="plot" width="{label_w + axis_w + 170}" height="{height}" role="img" '
            f'aria-label="{escape(title)}"><text x="0" y="14" font-size="13" font-weight="600">{escape(title)}</text>'
            f'{zero}{"".join(marks)}{axis}</svg>')


def recovery_section(table: RecoveryTable, heading: str = "h2") -> str:
    chart = bar_chart("recovery rate per behaviour (%)",
                      [(r.component, r.rate or 0.0) for r in table.behaviors], maximum=100.0, fmt="{:.1f}%")
    ours = "-" if table.mean is None else f"{table.mean:.1f}%"
    cards = [(f"mean recovery ({table.suite})", ours), ("behaviours kept", str(len(table.behaviors))),
             ("dropped", str(len(table.dropped))), ("tasks excluded (no completed trial)", str(len(table.excluded)))]
    dropped = (f"<h3>Dropped: fewer than {table.min_eligible} eligible tasks</h3>"
               f"{grid_html(tables.behavior_grid(table.dropped), numeric_from=3)}" if table.dropped else "")
    notes = "".join(f'<div class="muted">note: {escape(n)}</div>' for n in table.notes)
    return (f'<{heading}>Behaviour recovery: {escape(table.runs["tuned"])}</{heading}>'
            f'<div class="muted">base + h {escape(table.runs["base_h"])} · base + h* {escape(table.runs["base_hstar"])}'
            f" · bank {escape(table.bank)} · {table.n_tasks} tasks</div>"
            f'<div class="cards">{"".join(card_html(k, v) for k, v in cards)}</div>'
            f"<p>{ELIGIBILITY}</p><p class=muted>{'<br>'.join(escape(line) for line in tables.mean_lines(table))}</p>"
            f'<div class="plots">{chart}</div>{grid_html(tables.behavior_grid(table.behaviors), numeric_from=3)}'
            f"{dropped}{notes}")


def recovery_page(table: RecoveryTable | PooledRecovery) -> str:
    if isinstance(table, RecoveryTable):
        return page(f"unscaffold behaviours · {table.suite}",
                    f"<h1>{escape(table.suite)}: behaviour recovery</h1>{recovery_section(table)}")
    ours = "-" if table.mean is None else f"{table.mean:.1f}%"
    cards = [(f"pooled mean recovery ({len(table.suites)} suites)", ours), ("behaviours kept", str(table.behaviors)),
             (f"published ({table.published.behaviors} behaviours)", f"{table.published.mean:.1f}%")]
    suites = " + ".join(t.suite for t in table.suites)
    return page(f"unscaffold behaviours · {suites}",
                f"<h1>{escape(suites)}: behaviour recovery</h1>"
                f'<div class="cards">{"".join(card_html(k, v) for k, v in cards)}</div>'
                f"<p class=muted>{'<br>'.join(escape(line) for line in tables.pooled_lines(table))}</p>"
                + "".join(recovery_section(t) for t in table.suites))


def comparison_page(cmp: Comparison) -> str:
    chart = bar_chart("pass@1 per run (%)", [(r.label, r.scores["pass_at_1"].value) for r in cmp.runs],
                      maximum=100.0, fmt="{:.1f}%")
    diffs = forest_chart("Δ pass@1 vs baseline, points (95% CI)",
                         [(r.label, r.vs_baseline.diff) for r in cmp.runs if r.vs_baseline], -100.0, 100.0)
    recovery = "".join(recovery_section(t, "h3") for t in cmp.recovery)
    body = (f"<h1>{escape(cmp.suite)}: comparison of {len(cmp.runs)} runs</h1>"
            f'<div class="muted">split {escape(cmp.split or "default")} · {cmp.n_tasks} tasks · baseline '
            f"{escape(cmp.baseline)} · {cmp.samples} bootstrap samples over tasks (scenarios for SGC), seed "
            f"{cmp.seed}</div>"
            "<p>Each run is labelled from its own records: the model (base, or an adapter and the recipe that "
            "trained it), the harness (h: one bash tool; h*: the training-time harness) and a reviewer if any. "
            "Δ is the per-task pass@1 difference against the baseline, in points, with its interval; better / "
            "worse / same count tasks.</p>"
            f'<h2>Scores</h2><div class="plots">{chart}{diffs}</div>{grid_html(tables.score_grid(cmp))}'
            f"<h2>Cost</h2>{grid_html(tables.cost_grid(cmp), numeric_from=1)}"
            + (f"<h2>Over training seeds</h2>{grid_html(tables.seed_grid(cmp), numeric_from=1)}"
               if cmp.seed_groups else "")
            + (f'<h2>Rescue training</h2><div class="muted">{escape(cmp.published_source)}</div>'
               f"{grid_html(tables.rescue_grid(cmp), numeric_from=3)}" if cmp.rescue_methods else "")
            + (f'<h2>Data-source ablation</h2><div class="muted">{escape(cmp.ablation_source)}</div>'
               f"{grid_html(tables.ablation_grid(cmp), numeric_from=2)}" if cmp.ablation else "")
            + f'<h2>Behaviour recovery</h2><div class="muted">{escape(cmp.recovery_note)}</div>{recovery}')
    return page(f"unscaffold compare · {cmp.suite}", body)
