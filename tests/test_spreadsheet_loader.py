"""Real SpreadsheetBench folders: both namings and the Verified quirks, on tiny fake datasets."""

from __future__ import annotations

import json
from pathlib import Path

import openpyxl
import pytest

from tests.helpers import call, final, needs_bwrap
from unscaffold.benchmarks import load_suite
from unscaffold.benchmarks.spreadsheet.loader import load_dataset
from unscaffold.errors import InputError
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run


def xlsx(path: Path, rows: list[list[object]], sheet: str = "Sheet1") -> None:
    wb = openpyxl.Workbook()
    wb.active.title = sheet
    for row in rows:
        wb.active.append(row)
    path.parent.mkdir(parents=True, exist_ok=True)
    wb.save(path)


def pair(folder: Path, input_name: str, golden_name: str, value: object = 3) -> None:
    xlsx(folder / input_name, [["a", "b", "sum"], [1, 2, None]])
    xlsx(folder / golden_name, [["a", "b", "sum"], [1, 2, value]])


@pytest.fixture
def verified(tmp_path: Path) -> Path:
    """Verified naming, with a bare-named task, a mismatched id, an instruction only in prompt.txt and a
    task without files."""
    root = tmp_path / "verified"
    sheets = root / "spreadsheet"
    pair(sheets / "101", "1_101_init.xlsx", "1_101_golden.xlsx")
    (sheets / "101" / "prompt.txt").write_text("a prompt that dataset.json overrides")
    pair(sheets / "13284", "initial.xlsx", "golden.xlsx")
    pair(sheets / "42930", "1_42930_init.xlsx", "1_43930_golden.xlsx")
    pair(sheets / "55", "1_55_init.xlsx", "1_55_golden.xlsx", value=4)
    (sheets / "55" / "prompt.txt").write_text("Put a+b+1 in C2.\n")
    (sheets / "777").mkdir(parents=True)
    entries = [
        {"id": 101, "instruction": "Put a+b in C2.", "spreadsheet_path": "spreadsheet/101",
         "instruction_type": "Cell-Level Manipulation", "answer_position": "C2"},
        {"id": "13284", "instruction": "Put a+b in C2.", "spreadsheet_path": "spreadsheet/13284",
         "instruction_type": "Cell-Level Manipulation", "answer_position": "'Sheet1'!C2"},
        {"id": "42930", "instruction": "Put a+b in C2.", "spreadsheet_path": "spreadsheet/42930/1_42930_init.xlsx",
         "instruction_type": "Sheet-Level Manipulation", "answer_position": "C:C"},
        {"id": "55", "instruction": "", "spreadsheet_path": "spreadsheet/55",
         "instruction_type": "Cell-Level Manipulation", "answer_position": "\u00a0C2"},
        {"id": "777", "instruction": "x", "spreadsheet_path": "spreadsheet/777",
         "instruction_type": "Cell-Level Manipulation", "answer_position": "C2"},
        {"id": "888", "instruction": "x", "spreadsheet_path": "spreadsheet/888",
         "instruction_type": "Cell-Level Manipulation", "answer_position": "C2"},
    ]
    (root / "dataset.json").write_text(json.dumps(entries))
    return root


@pytest.fixture
def original(tmp_path: Path) -> Path:
    """The original release: three test cases per task, `_input`/`_answer`, dataset as JSON lines."""
    root = tmp_path / "original"
    for n in (1, 2, 3):
        xlsx(root / "spreadsheet" / "59196" / f"{n}_59196_input.xlsx", [["x"], [n], [None]])
        xlsx(root / "spreadsheet" / "59196" / f"{n}_59196_answer.xlsx", [["x"], [n], [n * 10]])
    entry = {"id": "59196", "instruction": "Multiply A2 by 10 into A3.", "spreadsheet_path": "spreadsheet/59196",
             "instruction_type": "Cell-Level Manipulation", "answer_position": "A3"}
    (root / "dataset.json").write_text(json.dumps(entry) + "\n")
    return root


def test_verified_naming_and_quirks(verified: Path) -> None:
    data = load_dataset(verified)
    assert [t.id for t in data.tasks] == ["101", "13284", "42930", "55"]
    by_id = {t.id: t for t in data.tasks}
    assert [(c.number, c.input.name, c.golden.name) for c in by_id["101"].cases] == [
        (1, "1_101_init.xlsx", "1_101_golden.xlsx")]
    assert by_id["101"].instruction == "Put a+b in C2." and by_id["101"].notes == []
    assert [(c.input.name, c.golden.name) for c in by_id["13284"].cases] == [("initial.xlsx", "golden.xlsx")]
    assert by_id["13284"].notes == ["case 1 input: initial.xlsx (bare name)", "case 1 golden: golden.xlsx (bare name)"]
    assert by_id["42930"].cases[0].golden.name == "1_43930_golden.xlsx"
    assert by_id["42930"].notes == ["case 1 golden: 1_43930_golden.xlsx (named with id 43930)"]
    assert by_id["42930"].folder == verified / "spreadsheet" / "42930"  # spreadsheet_path named a file in it
    assert by_id["55"].instruction == "Put a+b+1 in C2." and by_id["55"].notes == ["instruction read from prompt.txt"]
    assert data.skipped == {
        "777": f"no matching input/golden workbooks in {verified / 'spreadsheet' / '777'}",
        "888": "no folder for spreadsheet_path 'spreadsheet/888'",
    }


def test_original_naming_with_three_cases(original: Path) -> None:
    (task,) = load_dataset(original).tasks
    assert [(c.number, c.input.name, c.golden.name) for c in task.cases] == [
        (1, "1_59196_input.xlsx", "1_59196_answer.xlsx"), (2, "2_59196_input.xlsx", "2_59196_answer.xlsx"),
        (3, "3_59196_input.xlsx", "3_59196_answer.xlsx")]
    suite = load_suite("spreadsheet", original)
    (t,) = suite.tasks("test")
    assert t.split is None and t.meta["cases"] == [1, 2, 3]
    assert ("spreadsheet_path: spreadsheets/ (test cases 1_59196_input.xlsx, 2_59196_input.xlsx, "
            "3_59196_input.xlsx)") in t.instruction
    assert "Apply the same manipulation to every test case." in t.instruction


def test_bad_dataset_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="dataset.json: file not found"):
        load_dataset(tmp_path)
    (tmp_path / "dataset.json").write_text("[{\"id\": \"1\"}, {\"id\": \"1\"}]")
    with pytest.raises(InputError) as err:
        load_dataset(tmp_path)
    assert str(err.value) == f"{tmp_path / 'dataset.json'}: 1.id: duplicate task id '1'"
    (tmp_path / "dataset.json").write_text("{not json\n")
    with pytest.raises(InputError, match="neither JSON nor JSON lines"):
        load_dataset(tmp_path)
    (tmp_path / "dataset.json").write_text("[{\"id\": \"9\", \"instruction\": \"x\", \"answer_position\": \"A1\"}]")
    with pytest.raises(InputError) as err:
        load_dataset(tmp_path)
    assert str(err.value).endswith("dataset.json: no usable tasks (1 skipped; task 9: no folder for spreadsheet_path "
                                   "None)")


def test_workspace_holds_inputs_only_under_canonical_names(verified: Path, tmp_path: Path) -> None:
    suite = load_suite("spreadsheet", verified)
    task = next(t for t in suite.tasks() if t.id == "42930")
    config = suite.prepare(task, tmp_path / "trial", "local")
    files = sorted(str(p.relative_to(config.workspace)) for p in config.workspace.rglob("*"))
    assert files == ["output", "spreadsheets", "spreadsheets/1_42930_input.xlsx"]
    assert config.workdir == "/workspace" and [m.target for m in config.mounts] == ["/task"]
    fields = json.loads((tmp_path / "trial" / "task" / "task.json").read_text())
    assert fields == {"id": "42930", "instruction": "Put a+b in C2.", "instruction_type": "Sheet-Level Manipulation",
                      "answer_position": "C:C", "inputs": ["spreadsheets/1_42930_input.xlsx"],
                      "outputs": ["output/1_42930_output.xlsx"]}
    assert "answer_position: C:C\noutput_path: output/1_42930_output.xlsx\n" in task.instruction
    oracle = suite.prepare(task, tmp_path / "oracle", "local", oracle=True)
    assert [m.target for m in oracle.mounts] == ["/task", "/solution"]  # golden files only for the oracle
    assert suite.oracle_commands(task) == ["mkdir -p output && cp /solution/1_43930_golden.xlsx "
                                           "output/1_42930_output.xlsx"]


@needs_bwrap
def test_real_data_oracle_and_a_student_that_writes_nothing(verified: Path, original: Path, tmp_path: Path,
                                                            write_replay) -> None:
    summary = run(RunConfig(suite="spreadsheet", data=verified, student="oracle", out=tmp_path / "o", concurrency=2))
    assert summary.per_task == {"101": 1.0, "13284": 1.0, "42930": 1.0, "55": 1.0}
    summary = run(RunConfig(suite="spreadsheet", data=original, student="oracle", out=tmp_path / "o3"))
    assert summary.per_task == {"59196": 1.0}
    result = json.loads((tmp_path / "o3" / "trials" / "59196" / "result.json").read_text())
    assert [c["passed"] for c in result["details"]["cases"]] == [True, True, True]
    spec = write_replay({"*": [call("ls -A /solution 2>&1 | head -1; ls spreadsheets"), final("done")]})
    summary = run(RunConfig(suite="spreadsheet", data=verified, student=spec, out=tmp_path / "r", task_ids=["101"]))
    result = json.loads((tmp_path / "r" / "trials" / "101" / "result.json").read_text())
    assert summary.per_task == {"101": 0.0}
    assert result["reason"] == "output file output/1_101_output.xlsx not found"
    traj = json.loads((tmp_path / "r" / "trials" / "101" / "trajectory.json").read_text())
    assert traj["messages"][3]["content"] == ("ls: cannot access '/solution': No such file or directory\n"
                                              "1_101_input.xlsx\n\n[exit_code=0]")
