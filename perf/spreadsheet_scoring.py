"""Scoring the built-in spreadsheet suite's 70 tasks with the oracle, seconds per case, per engine.

Writes every task's input, golden and reference output, then scores each case (a) with LibreOffice
(where installed) and (b) with the `formulas` engine (cached values first: the engine where LibreOffice
is not installed; reported under the key `fallback`), goldens computed
afresh for each engine. The baseline, measured in the same run on a sample of cases, is what the
official pipeline spends per case: one LibreOffice conversion of each of the two workbooks plus
openpyxl reading both. Targets: every case passes, none comes near its limit, and the mean time per
case stays within the baseline (ratio <= 1).

Run: `.venv/bin/python -m perf.spreadsheet_scoring [--sample 8] [--json]`."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import openpyxl

from perf.common import command_line, print_block, printed_as_json
from unscaffold.benchmarks.spreadsheet.measure import reference_policy
from unscaffold.benchmarks.spreadsheet.recalc import Limits, libreoffice
from unscaffold.benchmarks.spreadsheet.scorer import clear_golden_cache, score_cases
from unscaffold.benchmarks.spreadsheet.tasks import BuiltTask, all_tasks, write_workbook


def write_cases(root: Path, tasks: list[BuiltTask]) -> list[tuple[BuiltTask, Path, Path]]:
    cases = []
    for task in tasks:
        folder = root / task.id
        folder.mkdir()
        inp, out, gold = folder / "input.xlsx", folder / "output.xlsx", folder / "golden.xlsx"
        write_workbook(task.inputs, inp)
        reference_policy(task, inp, out)
        write_workbook(task.golden, gold)
        cases.append((task, gold, out))
    return cases


def score_all(cases: list[tuple[BuiltTask, Path, Path]], engine: str) -> dict[str, Any]:
    clear_golden_cache()
    seconds, failures, engines = [], {}, set()
    for task, gold, out in cases:
        t = time.perf_counter()
        score = score_cases([(gold, out, out.name)], task.answer_position, engine=engine)  # type: ignore[arg-type]
        seconds.append(time.perf_counter() - t)
        engines.add(score.details["engine"])
        if score.reward < 1:
            failures[task.id] = score.reason
    return {"cases": len(cases), "passed": len(cases) - len(failures), "failures": failures,
            "engines": sorted(engines), "total_s": round(sum(seconds), 2),
            "mean_s": round(sum(seconds) / len(seconds), 3), "max_s": round(max(seconds), 3)}


def official_style(office: str, cases: list[tuple[BuiltTask, Path, Path]], work: Path) -> float:
    """Seconds per case for converting both workbooks with LibreOffice and reading them with openpyxl."""
    t = time.perf_counter()
    for i, (_, gold, out) in enumerate(cases):
        folder = work / f"c{i}"
        subprocess.run([office, f"-env:UserInstallation={(work / 'profile').as_uri()}", "--headless",
                        "--norestore", "--convert-to", "xlsx", "--outdir", str(folder), str(gold), str(out)],
                       capture_output=True, timeout=300, check=True)
        for name in (gold.name, out.name):
            openpyxl.load_workbook(folder / name, data_only=True)
    return (time.perf_counter() - t) / len(cases)


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--sample", type=int, default=8, help="cases timed for the baseline")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="unscaffold-perf-sheet-"))
    office = libreoffice()
    try:
        cases = write_cases(root, all_tasks())
        out: dict[str, Any] = {"case_limit_s": Limits().case_s}
        if office:
            step = max(len(cases) // args.sample, 1)
            (root / "baseline").mkdir()
            official_style(office, cases[:1], root / "baseline")  # a warm profile, as the scorer keeps one
            out["baseline_s_per_case"] = round(official_style(office, cases[::step][: args.sample],
                                                              root / "baseline"), 3)
            out["libreoffice"] = score_all(cases, "libreoffice")
        out["fallback"] = score_all(cases, "formulas")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for name in ("libreoffice", "fallback"):
        if name in out and "baseline_s_per_case" in out:
            out[name]["ratio_to_baseline"] = round(out[name]["mean_s"] / out["baseline_s_per_case"], 2)
    if printed_as_json(out, args.json):
        return
    if not office:
        print("LibreOffice is not installed: no baseline and no LibreOffice run (scripts/sysdeps.sh installs it)")
    else:
        print(f"baseline (official pipeline: 2 LibreOffice conversions + 2 reads): "
              f"{out['baseline_s_per_case']:.2f} s per case")
    for name in ("libreoffice", "fallback"):
        if name in out:
            r = out[name]
            ratio = f", ratio {r['ratio_to_baseline']:.2f} (target <= 1)" if "ratio_to_baseline" in r else ""
            print_block(f"{name}: {r['passed']}/{r['cases']} passed, mean {r['mean_s']:.2f} s, max {r['max_s']:.2f} s "
                        f"per case (limit {out['case_limit_s']:g} s){ratio}; engines {r['engines']}",
                        (f"FAILED {task_id}: {reason}" for task_id, reason in r["failures"].items()))


if __name__ == "__main__":
    main()
