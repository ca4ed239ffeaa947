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
from unscaffold.console import err_console, out_console
from unscaffold.errors import UnscaffoldError, did_you_mean
from unscaffold.iojson import write_text_atomic
from unscaffold.terminal_text import inert


def trial_rule(rule: str) -> Rule:
    if rule == "any":
        return "any"
    if rule == "majority":
        return "majority"
    raise UnscaffoldError(f"--rule: unknown rule {rule!r}; use any or majority"
                          f"{did_you_mean(rule, ('any', 'majority'))}")


def grid_table(title: str, grid: tables.Grid, numeric_from: int = 2) -> Table:
    headers, rows = grid
    table = Table(title=title)
    for i, h in enumerate(headers):
        table.add_column(h, justify="right" if i >= numeric_from else "left")
    for row in rows:
        table.add_row(*row)
    return table


def wrap(text: str, width: int, indent: str = "") -> list[str]:
    """`text` in lines of at most `width` (continuation lines start with `indent`; a word longer than a line
    stays whole) that do not end on a lone word: where it fits, the last word moves down with its neighbour."""
    lines: list[list[str]] = []
    for word in text.split():
        room = width - (len(indent) if len(lines) > 1 else 0)
        if lines and len(" ".join([*lines[-1], word])) <= room:
            lines[-1].append(word)
        else:
            lines.append([word])
    if len(lines) > 1 and len(lines[-1]) == 1 and len(lines[-2]) > 1:
        if len(indent) + len(lines[-2][-1]) + 1 + len(lines[-1][0]) <= width:
            lines[-1].insert(0, lines[-2].pop())
    return [("" if i == 0 else indent) + " ".join(words) for i, words in enumerate(lines)]


def folded(title: str, grid: tables.Grid, width: int) -> list[str]:
    """A table too wide for the terminal as one block per row: the row's first cell with its header, then
    `header: value` pairs packed into lines, so nothing is cut and no column wraps one word a line."""
    headers, rows = grid
    out = wrap(f"{title} ({len(rows)} row{'s' if len(rows) != 1 else ''}, one block each)", width)
    for row in rows:
        out += wrap(f"- {headers[0]}: {row[0] or '-'}", width, "    ")
        line = ""
        for header, value in zip(headers[1:], row[1:], strict=True):
            item = f"{header}: {value or '-'}"
            if line and len(line) + 2 + len(item) <= width:
                line += f"; {item}"
                continue
            if line:
                out.append(line)
            line = f"    {item}"
            if len(line) > width:
                out += ["    " + part for part in wrap(item, width - 4, "  ")]
                line = ""
        if line:
            out.append(line)
    return out


def print_grid(out: Console, title: str, grid: tables.Grid, numeric_from: int = 2) -> None:
    """The grid as a table where it fits the terminal, else folded to one block per row."""
    table = grid_table("", grid, numeric_from)  # the title goes above, wrapped as a sentence
    natural = out.measure(table, options=out.options.update(max_width=10_000)).maximum  # unclamped
    if natural <= out.width:
        print_lines(out, [title])
        out.print(table)
        return
    for line in folded(title, grid, out.width):
        out.print(inert(line), highlight=False, soft_wrap=True)


def print_lines(out: Console, lines: list[str]) -> None:
    """Sentences wrapped to the terminal (never a lone word on a line)."""
    for line in lines:
        for part in wrap(line, out.width, "  "):
            out.print(inert(part), highlight=False, soft_wrap=True)


def print_recovery(table: RecoveryTable) -> None:
    out = out_console()
    print_grid(out, f"behaviour recovery: {table.runs['tuned']}", tables.behavior_grid(table.behaviors),
               numeric_from=3)
    if table.dropped:
        print_grid(out, f"dropped (fewer than {table.min_eligible} eligible tasks)",
                   tables.behavior_grid(table.dropped), numeric_from=3)
    print_lines(out, tables.mean_lines(table) + [f"note: {n}" for n in table.notes])


def print_pooled(report: PooledRecovery) -> None:
    for table in report.suites:
        print_recovery(table)
    print_lines(out_console(), tables.pooled_lines(report))


def print_comparison(result: Comparison) -> None:
    out = out_console()
    title = f"{result.suite}: {result.n_tasks} tasks, baseline {result.baseline}"
    print_grid(out, title, tables.score_grid(result))
    print_grid(out, "cost", tables.cost_grid(result), numeric_from=1)
    if result.seed_groups:
        print_grid(out, "over training seeds (bootstrap over seeds)", tables.seed_grid(result), numeric_from=1)
    if result.rescue_methods:
        print_grid(out, f"rescue training; {result.published_source}", tables.rescue_grid(result), numeric_from=3)
    if result.ablation:
        print_grid(out, f"data-source ablation; {result.ablation_source}", tables.ablation_grid(result),
                   numeric_from=2)
    print_lines(out, [result.recovery_note])
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
        err_console().print(f"page: {out}", highlight=False, soft_wrap=True)
