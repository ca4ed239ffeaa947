"""The SpreadsheetBench score: every cell of `answer_position` must match the golden workbook.

Ranges are read as the official evaluator reads them (ranges.py), against the golden's sheets; the
output must have each such sheet under the same name, as the official code requires. Both workbooks
are recalculated first (recalc.py) and values compare under the official rules (values.py). Only
stored cells are compared (an empty cell equals an empty cell), so a workbook's claimed size costs
nothing. A task with several test cases passes only when all do (the official "hard" restriction;
the "soft" share is kept in the details).

Outcomes: a missing, refused, corrupt or wrong output scores 0 with the reason (the student's
failure), and so do an output the engine cannot recalculate (`recalculation_failed`, the reason
saying so) and an answer cell whose formula names another workbook (never followed; listed as a
refused artifact, so the trial never becomes training data).
A case that cannot be judged (a limit or crash while reading or recalculating, a golden
workbook or answer_position that cannot be used, a formula no engine computes) scores 0 with outcome
`verifier_error` and the reason. Nothing here raises on a bad output.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from unscaffold.benchmarks.base import Score
from unscaffold.bounded import Deadline, LimitExceeded
from unscaffold.outcomes import Outcome
from unscaffold.untrusted import REFUSED

from .intake import Refused
from .ranges import CellRange, column_letters, quote_sheet
from .recalc import (
    EngineChoice,
    ForeignReference,
    Limits,
    RecalculationFailed,
    ScoringError,
    WorkbookError,
    WorkbookValues,
    chosen_engine,
    libreoffice,
    load_values,
)
from .values import same_value, show

MAX_LISTED = 5
_GOLDEN_CACHE: dict[tuple[str, ...], WorkbookValues] = {}
_GOLDEN_LOCK = threading.Lock()
_GOLDEN_CACHE_SIZE = 256


class CaseResult(BaseModel):
    case: int
    output: str
    passed: bool
    reason: str | None = None
    outcome: str | None = Field(None, description="verifier_error when the case could not be judged")
    engine: str = "none"
    golden_engine: str = "none"
    checked_cells: int = 0
    mismatches: list[str] = Field(default_factory=list)
    mismatch_count: int = 0
    notes: list[str] = Field(default_factory=list)
    refused_link: bool = False
    recalculation_failed: bool = False
    foreign_references: list[str] = Field(default_factory=list, description="answer cells naming another workbook")


def compare_values(golden: WorkbookValues, output: WorkbookValues) -> tuple[int, list[str]]:
    """(cells checked, mismatch descriptions). Raises LookupError when the output lacks a sheet."""
    checked, mismatches = 0, []
    for name, *box in golden.ranges:
        gold_sheet = golden.sheet(name)
        out_sheet = output.sheet(name)
        if gold_sheet is None or out_sheet is None:
            raise LookupError(f"worksheet {name!r} not found in the output (it has {output.sheetnames})")
        rng = CellRange(name, *box)
        r1, c1, r2, c2 = rng.bounds(max(gold_sheet.max_row, out_sheet.max_row),
                                    max(gold_sheet.max_col, out_sheet.max_col))
        checked += (r2 - r1 + 1) * (c2 - c1 + 1)
        stored = {cell for sheet in (gold_sheet, out_sheet) for cell in sheet.cells
                  if r1 <= cell[0] <= r2 and c1 <= cell[1] <= c2}
        for row, col in sorted(stored):  # every other cell is empty in both, which matches
            expected, actual = gold_sheet.value(row, col), out_sheet.value(row, col)
            if isinstance(actual, ForeignReference) or not same_value(expected, actual):
                where = f"{quote_sheet(name)}!{column_letters(col)}{row}"
                got = repr(actual) if isinstance(actual, ForeignReference) else show(actual)
                mismatches.append(f"{where}: expected {show(expected)}, got {got}")
    return checked, mismatches


def golden_values(golden: Path, answer_position: str, engine: EngineChoice | None, limits: Limits,
                  deadline: Deadline) -> WorkbookValues:
    """The golden's answer cells, computed once per content, position and engine in this process
    (every trial of a task scores against the same golden)."""
    key = (hashlib.sha256(golden.read_bytes()).hexdigest(), answer_position, chosen_engine(engine),
           str(libreoffice()), repr(limits))
    with _GOLDEN_LOCK:
        if key in _GOLDEN_CACHE:
            return _GOLDEN_CACHE[key]
    values = load_values(golden, position=answer_position, engine=engine, limits=limits, deadline=deadline)
    with _GOLDEN_LOCK:
        if len(_GOLDEN_CACHE) >= _GOLDEN_CACHE_SIZE:
            _GOLDEN_CACHE.pop(next(iter(_GOLDEN_CACHE)))
        _GOLDEN_CACHE[key] = values
    return values


def clear_golden_cache() -> None:
    """Forget computed goldens (for measurements that compare engines)."""
    with _GOLDEN_LOCK:
        _GOLDEN_CACHE.clear()


def score_case(case: int, golden: Path, output: Path | Refused, answer_position: str, *,
               engine: EngineChoice | None = None, output_label: str | None = None,
               limits: Limits | None = None) -> CaseResult:
    """One test case, within `limits.case_s`; never raises for a bad output or a bad position."""
    limits = limits or Limits()
    label = output_label or (output.name if isinstance(output, Path) else "output")
    result = CaseResult(case=case, output=label, passed=False)
    if isinstance(output, Refused):
        result.reason, result.refused_link = str(output), output.link
        return result
    if not output.is_file():
        result.reason = f"output file {label} not found"
        return result
    deadline = Deadline(limits.case_s)
    try:
        gold_values = golden_values(golden, answer_position, engine, limits, deadline)
    except WorkbookError as e:
        return _verifier_error(result, f"the golden workbook cannot be used: {e}")
    except (ScoringError, LimitExceeded, RecalculationFailed) as e:
        return _verifier_error(result, f"golden workbook {golden.name}: {e}")
    try:
        out_values = load_values(output, ranges=[list(r) for r in gold_values.ranges], engine=engine,
                                 limits=limits, deadline=deadline, output=True)
    except WorkbookError as e:
        result.reason = f"output {label} cannot be opened: {str(e).removeprefix(output.name + ' ')}"
        return result
    except RecalculationFailed as e:
        result.reason, result.recalculation_failed = f"{label}: recalculation failed: {e}", True
        return result
    except (ScoringError, LimitExceeded) as e:
        return _verifier_error(result, f"{label}: {e}")
    result.engine, result.golden_engine = out_values.engine, gold_values.engine
    result.notes = gold_values.notes + out_values.notes
    result.foreign_references = [f"{quote_sheet(sheet.name)}!{column_letters(col)}{row}: {value}"
                                 for sheet in out_values.sheets.values()
                                 for (row, col), value in sorted(sheet.cells.items())
                                 if isinstance(value, ForeignReference)][:MAX_LISTED]
    try:
        result.checked_cells, mismatches = compare_values(gold_values, out_values)
    except LookupError as e:
        result.reason = str(e).strip("'\"")
        return result
    result.mismatch_count = len(mismatches)
    result.mismatches = mismatches[:MAX_LISTED]
    if mismatches:
        more = f" (and {len(mismatches) - 1} more cells)" if len(mismatches) > 1 else ""
        result.reason = f"{label}: {mismatches[0]}{more}"
    else:
        result.passed = True
    return result


def _verifier_error(result: CaseResult, reason: str) -> CaseResult:
    result.reason, result.outcome = reason, Outcome.VERIFIER_ERROR
    return result


def score_cases(cases: list[tuple[Path, Path | Refused, str]], answer_position: str, *,
                engine: EngineChoice | None = None, limits: Limits | None = None) -> Score:
    """(golden, output or why it was refused, output label) per test case -> reward 1 only when every
    case passes; outcome `verifier_error` when no case failed on its merits but one could not be judged."""
    results = [score_case(i + 1, golden, output, answer_position, engine=engine, output_label=label, limits=limits)
               for i, (golden, output, label) in enumerate(cases)]
    passed = sum(r.passed for r in results)
    engines = sorted({r.engine for r in results if r.engine != "none"} | {r.golden_engine for r in results
                                                                          if r.golden_engine != "none"})
    details: dict[str, Any] = {
        "engine": "+".join(engines) if engines else "none",
        "soft": passed / len(results) if results else 0.0,
        "cases": [r.model_dump(exclude_defaults=True) | {"case": r.case, "passed": r.passed} for r in results],
    }
    refused = [r.reason for r in results if r.refused_link]
    refused += [f"{r.output} refers to other workbooks in answer cells ({r.foreign_references[0]}); external "
                "references are never followed" for r in results if r.foreign_references]
    if refused:
        details[REFUSED] = refused
    judged = [r for r in results if not r.passed and r.outcome is None]
    failed = judged[0] if judged else next((r for r in results if not r.passed), None)
    return Score(reward=1.0 if results and failed is None else 0.0, reason=failed.reason if failed else None,
                 details=details, outcome=failed.outcome if failed else None)
