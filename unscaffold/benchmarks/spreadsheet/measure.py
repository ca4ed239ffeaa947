"""Measures the built-in tasks without a sandbox: the reference solutions' pass rate per split, which
tasks a naive whole-range writer fails, and how long scoring every task takes per engine.

    python -m unscaffold.benchmarks.spreadsheet.measure [--engine auto|libreoffice|formulas]

The naive policy writes the whole answer range in one pass: the right answer into every cell that is
empty in the input, and it regenerates the prefilled example cells as well, losing them (it clears the
range first). The scorer must fail exactly the tasks that have prefilled cells.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import solutions
from .ranges import parse_ref, quote_sheet
from .recalc import EngineChoice
from .scorer import score_cases
from .tasks import (
    CELL_LEVEL,
    HEADER,
    BuiltTask,
    all_tasks,
    python_heredoc,
    write_workbook,
)

Policy = Callable[[BuiltTask, Path, Path], None]


def reference_policy(task: BuiltTask, input_path: Path, output_path: Path) -> None:
    """The task's reference solution, run in this process (the oracle runs the same code in the sandbox)."""
    import openpyxl

    wb = openpyxl.load_workbook(input_path)
    getattr(solutions, task.solution)(wb, task.params)
    wb.save(output_path)


def naive_values(task: BuiltTask) -> list[tuple[str, int, int, Any]]:
    """(sheet, row, column, value) for every answer cell: the answer, or None where an example was."""
    prefilled = set(task.prefilled)
    out = []
    for sheet, coord in task.answer_cells():
        rng = parse_ref(coord)
        lost = task.instruction_type == CELL_LEVEL and f"{quote_sheet(sheet)}!{coord}" in prefilled
        out.append((sheet, rng.min_row or 1, rng.min_col or 1, None if lost else task.golden_value(sheet, coord)))
    return out


def naive_policy(task: BuiltTask, input_path: Path, output_path: Path) -> None:
    """Clear the answer range, then write the answer into each cell that was empty in the input."""
    import openpyxl

    wb = openpyxl.load_workbook(input_path)
    for sheet, row, col, value in naive_values(task):
        ws = wb[sheet] if sheet in wb.sheetnames else wb.create_sheet(sheet)
        ws.cell(row, col).value = value
    wb.save(output_path)


def naive_command(task: BuiltTask, input_path: str, output_path: str) -> str:
    """The naive policy as one `execute` command, for a replay student."""
    return python_heredoc(f"""{HEADER}
wb = openpyxl.load_workbook({input_path!r})
for sheet, row, col, value in {naive_values(task)!r}:
    ws = wb[sheet] if sheet in wb.sheetnames else wb.create_sheet(sheet)
    ws.cell(row, col).value = value
wb.save({output_path!r})""")


def score_policy(policy: Policy, tasks: list[BuiltTask], engine: EngineChoice | None = None
                 ) -> tuple[dict[str, float], dict[str, str | None], float]:
    """(reward per task, failure reason per task, seconds spent scoring)."""
    rewards: dict[str, float] = {}
    reasons: dict[str, str | None] = {}
    scoring_s = 0.0
    with tempfile.TemporaryDirectory(prefix="unscaffold-measure-") as tmp:
        for task in tasks:
            folder = Path(tmp) / task.id
            inp, out, gold = folder / "input.xlsx", folder / "output.xlsx", folder / "golden.xlsx"
            write_workbook(task.inputs, inp)
            policy(task, inp, out)
            write_workbook(task.golden, gold)
            t0 = time.perf_counter()
            score = score_cases([(gold, out, out.name)], task.answer_position, engine=engine)
            scoring_s += time.perf_counter() - t0
            rewards[task.id], reasons[task.id] = score.reward, score.reason
    return rewards, reasons, scoring_s


def measure(engine: EngineChoice | None = None) -> dict[str, Any]:
    tasks = all_tasks()
    ref, ref_reasons, ref_s = score_policy(reference_policy, tasks, engine)
    naive, _, naive_s = score_policy(naive_policy, tasks, engine)
    per_split = {}
    for split in ("train", "test"):
        ids = [t.id for t in tasks if t.split == split]
        per_split[split] = {"tasks": len(ids), "pass_pct": 100.0 * sum(ref[i] for i in ids) / len(ids)}
    return {
        "engine": engine or "auto",
        "reference": per_split,
        "reference_failures": {k: v for k, v in ref_reasons.items() if ref[k] < 1},
        "naive_failing": sorted(k for k, v in naive.items() if v < 1),
        "tasks_with_prefilled": sorted(t.id for t in tasks if t.prefilled),
        "scoring_s": {"reference_all": round(ref_s, 2), "naive_all": round(naive_s, 2)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["auto", "libreoffice", "formulas"], default=None)
    args = parser.parse_args()
    report = measure(args.engine)
    report["naive_fails_exactly_prefilled"] = report["naive_failing"] == report["tasks_with_prefilled"]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
