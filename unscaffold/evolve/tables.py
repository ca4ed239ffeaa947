"""The per-round table (and the pool's measurements) for the terminal; the JSON is DIR/rounds.json."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from unscaffold.evolve.records import EvolveReport

COLUMNS = ("round", "parent", "child", "status", "failing", "causes", "single", "repaired", "regressed",
           "still failing", "solved")


def rounds_table(report: EvolveReport) -> Table:
    table = Table(title=f"evolve {report.mode}: {report.suite} ({report.split}, {report.tasks} tasks)")
    for name in COLUMNS:
        table.add_column(name, justify="left" if name in ("parent", "child", "status", "causes") else "right")
    for r in report.rounds:
        measured = r.solved_after is not None
        table.add_row(str(r.round), r.parent, r.child or "-", r.status, str(len(r.failing)), ", ".join(r.causes) or "-",
                      str(len(r.single_task_failures)), str(len(r.repaired)) if measured else "-",
                      str(len(r.regressed)) if measured else "-", str(len(r.still_failing)) if measured else "-",
                      f"{r.solved_before} -> {r.solved_after}" if measured else str(r.solved_before))
    return table


def pool_tables(report: EvolveReport) -> list[Table]:
    if report.pool is None:
        return []
    pool = report.pool
    siblings = Table(title="pool: locality (against the parent)")
    for name in ("sibling", "parent", "repairs causes", "repairs", "regressions", "base repairs", "solved"):
        siblings.add_column(name)
    for s in pool.siblings:
        siblings.add_row(s.name, s.parent, ", ".join(s.causes), str(len(s.repairs)), str(len(s.regressions)),
                         str(len(s.base_repairs)), f"{s.solved}/{pool.tasks}")
    overlap = Table(title="pool: pairwise repair overlap (base repairs)")
    for name in ("a", "b", "shared", "union", "jaccard"):
        overlap.add_column(name)
    for o in pool.overlap:
        overlap.add_row(o.a, o.b, str(o.shared), str(o.union), f"{o.jaccard:.2f}")
    return [siblings, overlap]


def print_report(report: EvolveReport, console: Console) -> None:
    console.print(rounds_table(report))
    for table in pool_tables(report):
        console.print(table)
    if report.pool is not None:
        p = report.pool
        console.print(f"complementarity: one sample under each of {p.base_samples} siblings solves "
                      f"{p.sibling_coverage}/{p.tasks}; {p.base_samples} samples under the base solve "
                      f"{p.base_coverage}/{p.tasks} (one sample: {p.base_single})", highlight=False)
    for label, value in (("final bank", report.final_bank), ("K", report.k), ("pool file", report.pool_file)):
        if value:
            console.print(f"{label}: {value}", highlight=False)
    if report.stopped:
        console.print(f"[yellow]stopped: {report.stopped}")
    console.print(f"model calls {report.calls}, tokens {report.tokens}, ${report.usd:.4f}", highlight=False)
