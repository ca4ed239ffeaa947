"""Terminal table and HTML page of the cascade what-if (`unscaffold cascade-report`)."""

from __future__ import annotations

from html import escape

from rich.markup import escape as markup_escape
from rich.table import Table

from unscaffold.behaviors.html import grid_html
from unscaffold.console import out_console
from unscaffold.pages.document import page
from unscaffold.reviewer.cascade_whatif import ALL, CascadeWhatIf, whatif_rows


def _headline(result: CascadeWhatIf) -> str:
    total = result.cell(ALL, ALL)
    return (f"the gate would have skipped {total.skipped_steps} of {total.reviewed_steps} reviews "
            f"({100 * total.saved_review_share:.1f}%; {total.calls_saved} of {total.reviewer_calls} model calls) "
            f"and let {total.replacements_let_through} of "
            f"{total.replacements} REPLACE decisions through unreviewed "
            f"({100 * total.missed_replacement_share:.1f}%), over {result.trials} trials")


def print_whatif(result: CascadeWhatIf) -> None:
    headers, rows = whatif_rows(result)
    table = Table(title="cascade what-if (measured on these runs)")
    for i, h in enumerate(headers):
        table.add_column(h, justify="right" if i >= 2 else "left")
    for row in rows:
        table.add_row(*(markup_escape(cell) for cell in row))
    out = out_console()
    out.print(table)
    out.print(_headline(result), highlight=False, soft_wrap=True, markup=False)
    out.print(f"gate: {result.gate}", highlight=False, soft_wrap=True, markup=False)
    if result.not_reviewed_steps:
        out.print(f"note: {result.not_reviewed_steps} steps were never reviewed in the run (replace budget spent); "
                  "they are not counted", highlight=False, soft_wrap=True, markup=False)


def whatif_page(result: CascadeWhatIf) -> str:
    body = (f"<h1>Cascade what-if</h1><p>{escape(_headline(result))}.</p>"
            f'<div class="muted">gate: {escape(result.gate)}</div>'
            f'<div class="muted">runs: {escape(", ".join(result.runs))}</div>'
            f"{grid_html(whatif_rows(result))}"
            '<div class="muted">First-order estimate: a REPLACE let through would also leave replace budget for a '
            "later step, and the trajectory after it would differ.</div>")
    return page("cascade what-if", body)
