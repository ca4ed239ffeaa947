"""Built-in spreadsheet tasks: generation, the reference solutions (oracle 100%), the naive whole-range
writer failing exactly the tasks with prefilled cells, and what the student can and cannot see."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import call, final, needs_bwrap
from unscaffold.benchmarks import load_suite
from unscaffold.benchmarks.spreadsheet import tasks as builtin
from unscaffold.benchmarks.spreadsheet.measure import naive_command, naive_policy, reference_policy, score_policy
from unscaffold.benchmarks.spreadsheet.suite import SpreadsheetSuite, input_name, output_name
from unscaffold.errors import InputError
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run

# Tasks with prefilled cells in the answer range: these families always, split-names in variants 0 and 3.
PREFILLED = sorted([f"{family}-{v}" for family in ("staff-codes", "category-prefix", "grade-bands", "text-dates",
                                                   "running-balance") for v in range(5)]
                   + ["split-names-0", "split-names-3"])
# One oracle run through the sandbox covering prefilled cells, formulas, quoted and several sheets, a new
# sheet, column-only and multi-range positions, dates and rows that must end up empty.
SAMPLE = ["staff-codes-1", "budget-formulas-0", "price-lookup-1", "sort-table-0", "region-summary-4",
          "drop-cancelled-2", "due-dates-1"]


@pytest.fixture(scope="module")
def suite() -> SpreadsheetSuite:
    return SpreadsheetSuite()


def test_splits_and_ids(suite: SpreadsheetSuite) -> None:
    train, test = suite.tasks("train"), suite.tasks("test")
    assert (len(train), len(test)) == (42, 28)
    assert len({t.id for t in train + test}) == 70 and not {t.id for t in train} & {t.id for t in test}
    assert suite.splits() == ["train", "test"] and len(suite.tasks()) == 70
    with pytest.raises(InputError, match="splits train and test, not 'dev'"):
        suite.tasks("dev")


def test_generation_is_deterministic() -> None:
    first = builtin.all_tasks()
    second = builtin.all_tasks()
    assert [(t.id, t.instruction, t.answer_position, t.inputs, t.golden) for t in first] == [
        (t.id, t.instruction, t.answer_position, t.inputs, t.golden) for t in second]


def test_coverage_of_each_split(suite: SpreadsheetSuite) -> None:
    for split in ("train", "test"):
        tasks = suite.tasks(split)
        features = {f for t in tasks for f in t.meta["features"]}
        assert features >= {"prefilled", "dates", "rounding", "formulas", "multi-sheet", "quoted-sheet",
                            "column-range", "multi-range", "empty-cells"}, split
        kinds = {t.meta["instruction_type"] for t in tasks}
        assert kinds == {builtin.CELL_LEVEL, builtin.SHEET_LEVEL}
    positions = [t.meta["answer_position"] for t in suite.tasks()]
    assert any("''" in p for p in positions) and any(", " in p.split("!")[0] for p in positions)


def test_prefilled_cells_are_kept_in_the_golden(suite: SpreadsheetSuite) -> None:
    assert sorted(t.id for t in suite.built.values() if t.prefilled) == PREFILLED
    for t in suite.built.values():
        inputs = {s.name: s.cells for s in t.inputs}
        for sheet, coord in t.answer_cells():
            if any(p.endswith(f"!{coord}") for p in t.prefilled):
                assert t.golden_value(sheet, coord) == inputs[sheet][coord], (t.id, coord)


def test_instruction_carries_the_fields(suite: SpreadsheetSuite) -> None:
    task = next(t for t in suite.tasks() if t.id == "share-of-total-3")
    lines = task.instruction.splitlines()
    assert lines[2].startswith("instruction: Fill in each region's Share of the total sales")
    assert lines[3:7] == [
        "spreadsheet_path: spreadsheets/1_share-of-total-3_input.xlsx",
        "instruction_type: Cell-Level Manipulation",
        "answer_position: 'Region ''A'' & ''B'''!C2:C" + task.meta["answer_position"].rsplit(":C", 1)[1],
        "output_path: output/1_share-of-total-3_output.xlsx",
    ]


def test_reference_solutions_and_the_naive_writer_in_process() -> None:
    """Every task, scored with the Python engine (the sandboxed runs below use the same solution code)."""
    tasks = builtin.all_tasks()
    rewards, reasons, _ = score_policy(reference_policy, tasks, engine="formulas")
    assert {k: reasons[k] for k, v in rewards.items() if v < 1} == {}
    rewards, reasons, _ = score_policy(naive_policy, tasks, engine="formulas")
    assert sorted(k for k, v in rewards.items() if v < 1) == PREFILLED
    assert reasons["staff-codes-0"] == "output.xlsx: Staff!D2: expected 'I.NOVAK', got None (and 1 more cells)"


@needs_bwrap
def test_oracle_sample_through_the_sandbox(tmp_path: Path) -> None:
    summary = run(RunConfig(suite="spreadsheet", student="oracle", task_ids=SAMPLE, out=tmp_path, concurrency=2,
                            sandbox={"keep_workspace": True}))  # the workspace is looked at afterwards
    assert summary.per_task == {t: 1.0 for t in SAMPLE}
    result = json.loads((tmp_path / "trials" / "budget-formulas-0" / "result.json").read_text())
    assert result["details"]["engine"] in ("libreoffice", "formulas")  # which engine recalculated is recorded
    trial = tmp_path / "trials" / "staff-codes-1"
    assert sorted(str(p.relative_to(trial / "workspace")) for p in (trial / "workspace").rglob("*.xlsx")) == [
        f"output/{output_name('staff-codes-1')}", f"spreadsheets/{input_name('staff-codes-1')}"]
    assert not (trial / "golden").exists()  # goldens are written at scoring, to a private folder


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize("split", ["train", "test"])
def test_oracle_scores_100_on_each_split(tmp_path: Path, split: str) -> None:
    summary = run(RunConfig(suite="spreadsheet", student="oracle", split=split, out=tmp_path, concurrency=2))
    assert summary.pass_at_1 == 100.0 and summary.n_tasks == {"train": 42, "test": 28}[split]


def naive_replay(suite: SpreadsheetSuite, ids: list[str]) -> dict[str, list[dict]]:
    return {i: [call(naive_command(suite.built[i], f"spreadsheets/{input_name(i)}", f"output/{output_name(i)}")),
                final("Filled the whole answer range.")] for i in ids}


@needs_bwrap
def test_naive_replay_fails_the_prefilled_tasks(suite: SpreadsheetSuite, tmp_path: Path, write_replay) -> None:
    ids = ["staff-codes-0", "split-names-0", "split-names-1", "line-totals-2", "sort-table-3"]
    spec = write_replay(naive_replay(suite, ids))
    summary = run(RunConfig(suite="spreadsheet", student=spec, task_ids=ids, out=tmp_path, concurrency=2))
    assert {k for k, v in summary.per_task.items() if v < 1} == {"staff-codes-0", "split-names-0"}
    result = json.loads((tmp_path / "trials" / "split-names-0" / "result.json").read_text())
    assert result["reason"].startswith("output/1_split-names-0_output.xlsx: Contacts!B2: expected '")


@needs_bwrap
@pytest.mark.slow
def test_naive_replay_fails_exactly_the_prefilled_tasks(suite: SpreadsheetSuite, tmp_path: Path,
                                                        write_replay) -> None:
    ids = sorted(suite.built)
    summary = run(RunConfig(suite="spreadsheet", student=write_replay(naive_replay(suite, ids)), out=tmp_path,
                            concurrency=2))
    assert sorted(k for k, v in summary.per_task.items() if v < 1) == PREFILLED


@needs_bwrap
def test_student_sees_inputs_and_task_fields_but_no_gold(tmp_path: Path, write_replay) -> None:
    spec = write_replay({"*": [call("ls -A . spreadsheets output; cat /task/task.json; ls /solution 2>&1 | head -1"),
                               final("nothing")]})
    run(RunConfig(suite="spreadsheet", student=spec, task_ids=["category-prefix-2"], out=tmp_path))
    trial = tmp_path / "trials" / "category-prefix-2"
    seen = json.loads((trial / "trajectory.json").read_text())["messages"][3]["content"]
    assert seen.startswith(".:\noutput\nspreadsheets\n\noutput:\n\nspreadsheets:\n1_category-prefix-2_input.xlsx\n")
    fields = json.loads(seen[seen.index("{"): seen.rindex("}") + 1])
    assert fields["outputs"] == ["output/1_category-prefix-2_output.xlsx"] and "golden" not in seen
    result = json.loads((trial / "result.json").read_text())
    assert result["reward"] == 0.0
    assert result["reason"] == "output file output/1_category-prefix-2_output.xlsx not found"


def test_leak_markers_name_ids_and_distinctive_gold(suite: SpreadsheetSuite) -> None:
    markers = set(suite.leak_markers())
    staff = suite.built["staff-codes-0"]
    assert {"staff-codes-0", "budget-formulas-4", staff.golden_value("Staff", "D4")} <= markers
    assert "I.NOVAK" not in markers  # a prefilled example: the student sees it in the input
    assert "Open" not in markers and "F" not in markers  # too short to be distinctive
    task = suite.built["due-dates-0"]
    assert task.golden_value("Invoices", "E2").strftime("%Y-%m-%d") in markers
    assert load_suite("spreadsheet").bank_path() == Path(builtin.__file__).parent / "hstar"
