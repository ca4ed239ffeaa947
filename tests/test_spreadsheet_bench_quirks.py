"""A SpreadsheetBench-shaped folder with every quirk met in the real data: the oracle scores 100%, and a
student that saves the inputs unchanged passes exactly where the official comparison passes them (the
expected results are written by hand from the official rules)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from openpyxl.worksheet.formula import ArrayFormula

from tests.helpers import needs_bwrap
from tests.spreadsheet_books import book, with_cached
from unscaffold.benchmarks.spreadsheet.recalc import engine_summary
from unscaffold.benchmarks.spreadsheet.suite import SpreadsheetSuite, input_name, output_name
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run

NBSP = "\u00a0"
# id -> (answer_position, input sheets, golden sheets); a golden differs from its input only where noted
TASKS: dict[str, tuple[str, dict[str, dict[str, Any]], dict[str, dict[str, Any]]]] = {
    "q1": ("'Sheet1!'A2:B3", {"Sheet1": {"A1": "k", "B1": "v"}},
           {"Sheet1": {"A1": "k", "B1": "v", "A2": "x", "B2": 1, "A3": "y", "B3": 2}}),
    "q2": ("Updated Data'!B5:B6", {"Notes": {"A1": "n"}, "Updated Data": {"B5": 5, "B6": 6}},
           {"Notes": {"A1": "changed outside the range"}, "Updated Data": {"B5": 5, "B6": 6}}),
    "q3": ("Sheet1'!A1:C3", {"Sheet1": {"A1": 1}}, {"Sheet1": {"A1": 1, "C3": 3.14159}}),
    "q4": ("'Sub CO's'!B4:B5", {"Sub CO's": {"B4": "a"}}, {"Sub CO's": {"B4": "a", "B5": "b"}}),
    "q5": ("'Sheet2'!'B7:C8", {"Sheet1": {}, "Sheet2": {"B7": 1}}, {"Sheet1": {}, "Sheet2": {"B7": 1, "C8": 2}}),
    "q6": ("'99250!A1:B2','99250!D1:D2'", {"99250": {"A1": 1, "D2": 4}}, {"99250": {"A1": 1, "D2": 4}}),
    "q7": ("MINUS'!B2:C3,'PLUS'!B2:C3", {"MINUS": {"B2": 1}, "PLUS": {"B2": 1}},
           {"MINUS": {"B2": 1}, "PLUS": {"B2": 1, "C3": -1}}),
    "q8": ("A1:B2", {"S": {"A1": 2, "A2": 5}},
           {"S": {"A1": 2, "A2": 5, "B1": ArrayFormula("B1", "=SUM(A1:A2*A1:A2)"),
                  "B2": '=HYPERLINK("http://example.com","link")'}}),
    "q9": ("C2", {"Sheet1": {"C2": "same"}}, {"Sheet1": {"C2": "same"}}),
    "q10": ("'Sheet1'!A1, B2", {"Sheet1": {"A1": 1}}, {"Sheet1": {"A1": 1, "B2": 2}}),
}
# The official comparison of each unchanged input: q2, q6 and q9 pass (nothing changes in their ranges);
# q10 crashes there (" B2" is no cell), so it is read as Excel reads it and fails like the others.
UNCHANGED = {"q1": 0.0, "q2": 1.0, "q3": 0.0, "q4": 0.0, "q5": 0.0, "q6": 1.0, "q7": 0.0, "q8": 0.0, "q9": 1.0,
             "q10": 0.0}


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bench")
    entries = []
    for task_id, (position, inputs, golden) in TASKS.items():
        folder = root / "spreadsheet" / task_id
        cases = (1, 2) if task_id == "q9" else (1,)
        for n in cases:
            space = " " if n == 2 else ""  # the real data ships `2_<id>_input .xlsx`
            book(folder / f"{n}_{task_id}_input{space}.xlsx", inputs)
            book(folder / f"{n}_{task_id}_answer.xlsx", golden)
        entries.append({"id": task_id, "instruction": NBSP if task_id == "q9" else f"Solve {task_id}.",
                        "spreadsheet_path": f"spreadsheet/{task_id}", "instruction_type": "Cell-Level Manipulation",
                        "answer_position": position})
    with_cached(root / "spreadsheet" / "q8" / "1_q8_answer.xlsx", {"B1": 29, "B2": "link"})  # as Excel saved it
    (root / "dataset.json").write_text(json.dumps(entries))
    return root


def test_loader_keeps_every_task_and_case(bench: Path) -> None:
    suite = SpreadsheetSuite(bench)
    assert suite.dataset is not None and suite.dataset.skipped == {}
    q9 = suite.real("q9")
    assert q9 is not None and q9.instruction == NBSP
    assert [c.input.name for c in q9.cases] == ["1_q9_input.xlsx", "2_q9_input .xlsx"]
    assert q9.notes == ["'2_q9_input .xlsx': a space before .xlsx",
                        "instruction is only whitespace ('\\xa0') as shipped; the task is kept"]


def score_all(suite: SpreadsheetSuite, tmp_path: Path, source: str) -> dict[str, float]:
    """Each task's reward when the output is a copy of the golden (`answer`) or of the input (`input`)."""
    rewards = {}
    for task in suite.tasks():
        real = suite.real(task.id)
        assert real is not None
        trial = tmp_path / task.id
        suite.prepare(task, trial, "none")
        for case in real.cases:
            shutil.copyfile(case.golden if source == "answer" else case.input,
                            trial / "workspace" / "output" / output_name(task.id, case.number))
        score = suite.score(task, trial, None, None)  # type: ignore[arg-type]
        assert score.outcome is None, (task.id, score.reason)
        rewards[task.id] = score.reward
    return rewards


def test_oracle_scores_100_and_unchanged_inputs_pass_where_the_official_comparison_does(
        bench: Path, tmp_path: Path) -> None:
    suite = SpreadsheetSuite(bench)
    assert score_all(suite, tmp_path / "oracle", "answer") == {t: 1.0 for t in TASKS}
    assert score_all(suite, tmp_path / "unchanged", "input") == UNCHANGED


@needs_bwrap
def test_oracle_through_the_sandbox(bench: Path, tmp_path: Path) -> None:
    summary = run(RunConfig(suite="spreadsheet", data=bench, student="oracle", task_ids=["q4", "q8", "q9"],
                            out=tmp_path, concurrency=2))
    assert summary.per_task == {"q4": 1.0, "q8": 1.0, "q9": 1.0}
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["scoring_engine"] == engine_summary() and results["data"] == str(bench)
    result = json.loads((tmp_path / "trials" / "q8" / "result.json").read_text())
    case = result["details"]["cases"][0]
    assert case["golden_engine"] == case["engine"] != "none"  # which engine recalculated is recorded
    assert input_name("q9", 2) == "2_q9_input.xlsx"  # the workspace uses canonical names
