"""Terminal output of `unscaffold behaviors` and `unscaffold compare`: rich tables of the shared rows,
JSON on request, and the page written where asked."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from unscaffold.behaviors import tables
from unscaffold.behaviors.compare import Comparison
from unscaffold.behaviors.recovery import PooledRecovery, RecoveryTable, Rule
from unscaffold.errors import UnscaffoldError
from unscaffold.iojson import write_text_atomic


def trial_rule(rule: str) -> Rule:
    if rule == "any" or rule == "majority":
        return rule
    raise UnscaffoldError(f"--rule: unknown rule {rule!r}; use any or majority")


def grid_table(title: str, grid: tables.Grid, numeric_from: int = 2) -> Table:
    headers, rows = grid
    table = Table(title=title)
    for i, h in enumerate(headers):
        table.add_column(h, justify="right" if i >= numeric_from else "left")
    for row in rows:
        table.add_row(*row)
    return table


def print_recovery(table: RecoveryTable) -> None:
    out = Console()
    out.print(grid_table(f"behaviour recovery: {table.runs['tuned']}", tables.behavior_grid(table.behaviors)))
    if table.dropped:
        out.print(grid_table(f"dropped (fewer than {table.min_eligible} eligible tasks)",
                             tables.behavior_grid(table.dropped)))
    for line in tables.mean_lines(table) + [f"note: {n}" for n in table.notes]:
        out.print(line, highlight=False, soft_wrap=True)


def print_pooled(report: PooledRecovery) -> None:
    for table in report.suites:
        print_recovery(table)
    for line in tables.pooled_lines(report):
        Console().print(line, highlight=False, soft_wrap=True)


def print_comparison(result: Comparison) -> None:
    out = Console()
    title = f"{result.suite}: {result.n_tasks} tasks, baseline {result.baseline}"
    out.print(grid_table(title, tables.score_grid(result)))
    out.print(grid_table("cost", tables.cost_grid(result), numeric_from=1))
    if result.seed_groups:
        out.print(grid_table("over training seeds (bootstrap over seeds)", tables.seed_grid(result), numeric_from=1))
    if result.rescue_methods:
        out.print(grid_table(f"rescue training; {result.published_source}", tables.rescue_grid(result), numeric_from=3))
    out.print(result.recovery_note, highlight=False, soft_wrap=True)
    for table in result.recovery:
        print_recovery(table)


def emit(result: BaseModel, page: Callable[[], str], out: Path | None, as_json: bool, show: Callable[[], None]) -> None:
    """JSON or the terminal tables on stdout; the self-contained page to `out` when asked."""
    if out:
        write_text_atomic(out, page())
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
    else:
        show()
    if out:
        Console(stderr=True).print(f"page: {out}", highlight=False)
