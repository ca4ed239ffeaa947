"""The SpreadsheetBench score: every cell of `answer_position` must match the golden workbook.

Both workbooks are recalculated first (recalc.py), ranges come from the fixed parser (ranges.py) and
values compare under the official rules (values.py). A task with several test cases passes only when
all do (the official "hard" restriction; the "soft" share is kept in the details). A missing,
corrupt or unreadable output scores 0 with the reason; nothing here raises on a bad output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from unscaffold.benchmarks.base import Score
from unscaffold.benchmarks.spreadsheet.ranges import RangeError, column_letters, parse_answer_position, quote_sheet
from unscaffold.benchmarks.spreadsheet.recalc import EngineChoice, WorkbookError, WorkbookValues, load_many
from unscaffold.benchmarks.spreadsheet.values import same_value, show

MAX_LISTED = 5


class CaseResult(BaseModel):
    case: int
    output: str
    passed: bool
    reason: str | None = None
    engine: str = "none"
    golden_engine: str = "none"
    checked_cells: int = 0
    mismatches: list[str] = Field(default_factory=list)
    mismatch_count: int = 0
    notes: list[str] = Field(default_factory=list)


def compare_values(golden: WorkbookValues, output: WorkbookValues, answer_position: str) -> tuple[int, list[str]]:
    """(cells checked, mismatch descriptions). Raises ValueError when the position or a sheet is unusable."""
    checked, mismatches = 0, []
    for rng in parse_answer_position(answer_position):
        name = rng.sheet if rng.sheet is not None else golden.sheetnames[0]
        gold_sheet = golden.sheet(name)
        if gold_sheet is None:
            raise ValueError(f"sheet {name!r} of answer_position is not in the golden workbook "
                             f"(it has {golden.sheetnames})")
        out_sheet = output.sheet(gold_sheet.name)
        if out_sheet is None:
            raise LookupError(f"worksheet {gold_sheet.name!r} not found in the output (it has {output.sheetnames})")
        max_row = max(gold_sheet.max_row, out_sheet.max_row)
        max_col = max(gold_sheet.max_col, out_sheet.max_col)
        for row, col in rng.cells(max_row, max_col):
            checked += 1
            expected, actual = gold_sheet.value(row, col), out_sheet.value(row, col)
            if not same_value(expected, actual):
                where = f"{quote_sheet(gold_sheet.name)}!{column_letters(col)}{row}"
                mismatches.append(f"{where}: expected {show(expected)}, got {show(actual)}")
    return checked, mismatches


def score_case(case: int, golden: Path, output: Path, answer_position: str, *,
               engine: EngineChoice | None = None, output_label: str | None = None) -> CaseResult:
    """One test case; never raises for a bad output or a bad position."""
    label = output_label or output.name
    result = CaseResult(case=case, output=label, passed=False)
    if not output.is_file():
        result.reason = f"output file {label} not found"
        return result
    try:
        gold_values, out_values = load_many([golden, output], engine=engine, prefer_cached=[True, False])
    except WorkbookError as e:
        if e.path == golden:
            result.reason = f"the golden workbook cannot be used: {e}"
        else:
            result.reason = f"output {label} cannot be opened: {str(e).removeprefix(output.name + ' ')}"
        return result
    result.engine, result.golden_engine = out_values.engine, gold_values.engine
    result.notes = gold_values.notes + out_values.notes
    try:
        result.checked_cells, mismatches = compare_values(gold_values, out_values, answer_position)
    except RangeError as e:
        result.reason = f"answer_position {answer_position!r} cannot be parsed: {e}"
        return result
    except (ValueError, LookupError) as e:
        result.reason = str(e).strip("'\"")
        return result
    result.mismatch_count = len(mismatches)
    result.mismatches = mismatches[:MAX_LISTED]
    if not result.checked_cells:
        result.reason = "answer_position names no cells"
    elif mismatches:
        more = f" (and {len(mismatches) - 1} more cells)" if len(mismatches) > 1 else ""
        result.reason = f"{label}: {mismatches[0]}{more}"
    else:
        result.passed = True
    return result


def score_cases(cases: list[tuple[Path, Path, str]], answer_position: str, *,
                engine: EngineChoice | None = None) -> Score:
    """(golden, output, output label) per test case -> reward 1 only when every case passes."""
    results = [score_case(i + 1, golden, output, answer_position, engine=engine, output_label=label)
               for i, (golden, output, label) in enumerate(cases)]
    passed = sum(r.passed for r in results)
    engines = sorted({r.engine for r in results if r.engine != "none"} | {r.golden_engine for r in results
                                                                          if r.golden_engine != "none"})
    details: dict[str, Any] = {
        "engine": "+".join(engines) if engines else "none",
        "soft": passed / len(results) if results else 0.0,
        "cases": [r.model_dump(exclude_defaults=True) | {"case": r.case, "passed": r.passed} for r in results],
    }
    failed = next((r for r in results if not r.passed), None)
    return Score(reward=1.0 if results and failed is None else 0.0, reason=failed.reason if failed else None,
                 details=details)
