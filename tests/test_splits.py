"""Split files give real data its train, validation and test tasks; test tasks never feed learning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from spreadsheet_folder import TEST, TRAIN, build_folder
from typer.testing import CliRunner

from tests.helpers import ROOT, call, final, message_of, needs_bwrap
from unscaffold.benchmarks import load_suite
from unscaffold.benchmarks.splits import read_split_file, seeded_split
from unscaffold.cli import app
from unscaffold.errors import InputError
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return build_folder(tmp_path)


def test_json_and_text_forms_read_the_same(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text(json.dumps({"train": [101, "b"], "test": ["c"], "comment": "x"}))
    (tmp_path / "s.txt").write_text("# made by hand\ntrain:\n101\nb   # the second\n\ntest:\nc\n")
    a, b = read_split_file(tmp_path / "s.json"), read_split_file(tmp_path / "s.txt")
    assert (a.train, a.validation, a.test) == (b.train, b.validation, b.test) == (["101", "b"], [], ["c"])
    assert a.split_of() == {"101": "train", "b": "train", "c": "test"}


@pytest.mark.parametrize("text, message", [
    ('{"train": ["a", "b"], "test": ["b"]}', "test: task id 'b' is listed twice (train and test)"),
    ('{"train": ["a", "a"]}', "train: task id 'a' is listed twice (train)"),
    ("train:\na\ntest:\na\n", "test: task id 'a' is listed twice (train and test)"),
    ("a\ntrain:\n", "line 1: task id 'a' before any `train:`, `validation:` or `test:` line"),
    ("dev:\na\n", "line 1: unknown split 'dev' (splits: train, validation, test)"),
    ('{"train": ["a"], "dev": ["b"]}', "dev: Extra inputs are not permitted"),
    ('{"train": ["a"]', "starts like JSON but is not valid JSON"),
])
def test_bad_split_files_are_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "s"
    path.write_text(text)
    assert message_of(InputError, read_split_file, path) == f"{path}: {message}"


def test_a_split_file_gives_real_data_its_splits_in_file_order(data: Path, tmp_path: Path) -> None:
    (tmp_path / "s.txt").write_text("train:\nt-text\nt-plain\nvalidation:\nt-bare\ntest:\nx-secret-2\n")
    suite = load_suite("spreadsheet", data, tmp_path / "s.txt")
    assert suite.splits() == ["train", "validation", "test"]
    assert [(t.id, t.split) for t in suite.tasks("train")] == [("t-text", "train"), ("t-plain", "train")]
    assert [t.id for t in suite.tasks(None)] == ["t-text", "t-plain", "t-bare", "x-secret-2"]
    assert [t.id for t in suite.named_tasks(["t-plain", "t-bare"], "train")] == ["t-plain"]
    with pytest.raises(InputError, match=r"^--split: the split file .*s.txt has the splits train, validation, test, "
                                         r"not 'dev'$"):
        suite.tasks("dev")


def test_unknown_ids_and_suites_without_real_data_are_refused(data: Path, tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"train": ["t-plain"], "test": ["nope"]}))
    with pytest.raises(InputError) as err:
        load_suite("spreadsheet", data, path)
    assert str(err.value) == f"{path}: test: unknown task id 'nope': not a task of the data"
    (data / "spreadsheet" / "t-plain" / "1_t-plain_golden.xlsx").unlink()  # the data has it, but it is skipped
    path.write_text(json.dumps({"train": ["t-plain"]}))
    with pytest.raises(InputError, match="unknown task id 't-plain': not a task of the data \\(the data has it "
                                         "but it was skipped: no matching input/golden workbooks in "):
        load_suite("spreadsheet", data, path)
    with pytest.raises(InputError, match="^--split-file: suite 'appworld_lite' generates its own tasks and splits"):
        load_suite("appworld_lite", None, path)


def test_the_cli_error_is_one_line_with_exit_2(data: Path, tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text(json.dumps({"train": ["t-plain", "t-plain"]}))
    result = CliRunner().invoke(app, ["run", "spreadsheet", "--student", "oracle", "--data", str(data),
                                      "--split-file", str(tmp_path / "s.json"), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert f"{tmp_path / 's.json'}: train: task id 't-plain' is listed twice (train)" in result.output


@needs_bwrap
def test_run_on_the_test_split_evaluates_exactly_the_listed_test_ids(data: Path, tmp_path: Path,
                                                                      write_replay) -> None:
    (tmp_path / "s.json").write_text(json.dumps({"train": ["t-plain", "t-bare"], "validation": ["t-other"],
                                                 "test": ["t-range", "t-text"]}))
    spec = write_replay({"*": [call("ls spreadsheets"), final("done")]})
    summary = run(RunConfig(suite="spreadsheet", data=data, split="test", split_file=tmp_path / "s.json",
                            student=spec, out=tmp_path / "r"))
    assert summary.per_task == {"t-range": 0.0, "t-text": 0.0}
    assert sorted(p.name for p in (tmp_path / "r" / "trials").iterdir()) == ["t-range", "t-text"]
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["split_file"] == str(tmp_path / "s.json")


def test_seeded_split_is_reproducible_and_sized(tmp_path: Path, data: Path) -> None:
    ids = list(TRAIN)
    a = seeded_split(ids, {"train": 3, "validation": 1, "test": 2}, seed=7)
    assert a == seeded_split(list(reversed(ids)), {"train": 3, "validation": 1, "test": 2}, seed=7)
    assert a.sizes() == {"train": 3, "validation": 1, "test": 2}
    assert sorted(a.train + a.validation + a.test) == sorted(ids)
    with pytest.raises(InputError, match="^--sizes: 7 tasks asked for, the data has 6$"):
        seeded_split(ids, {"train": 7}, seed=0)
    result = CliRunner().invoke(app, ["split", str(data), "--sizes", "train=5,test=3", "--seed", "3",
                                      "--out", str(tmp_path / "s.json")])
    assert result.exit_code == 0, result.output
    written = read_split_file(tmp_path / "s.json")
    assert written.sizes() == {"train": 5, "validation": 0, "test": 3}
    assert sorted(written.train + written.test) == sorted([*TRAIN, *TEST])
    assert written == seeded_split([*TRAIN, *TEST], {"train": 5, "test": 3}, seed=3)
    result = CliRunner().invoke(app, ["split", str(data), "--sizes", "train=5,dev=1", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "--sizes: unknown split 'dev' (splits: train, validation, test)" in result.output


def test_the_shipped_paper_splits_have_the_paper_sizes() -> None:
    sheets = read_split_file(ROOT / "splits" / "spreadsheetbench_verified.json")
    assert sheets.sizes() == {"train": 300, "validation": 0, "test": 100}
    assert "13284" in sheets.train and "42930" in sheets.train  # two ids whose files are known quirks
    appworld = read_split_file(ROOT / "splits" / "appworld_train147.txt")
    assert appworld.sizes() == {"train": 147, "validation": 0, "test": 0}
    uspto = read_split_file(ROOT / "splits" / "uspto_harbor.txt")
    assert uspto.sizes() == {"train": 500, "validation": 0, "test": 100}
    assert (uspto.train[0], uspto.test[-1]) == ("uspto-train-000", "uspto-test-099")


def test_rescue_training_and_router_validation_refuse_test_tasks(data: Path, tmp_path: Path) -> None:
    from unscaffold.rescue.train import RescueTrainConfig, train

    split_file = data.parent / "split.json"
    with pytest.raises(InputError, match="^--split: x-secret-1 is a test task; test tasks never feed rescue "
                                         "training$"):
        train(RescueTrainConfig(suite="spreadsheet", model="tiny", out=tmp_path / "o", data=data,
                                split_file=split_file, split="test"))
    trial = tmp_path / "run" / "trials" / "x-secret-2"
    trial.mkdir(parents=True)
    (trial / "result.json").write_text(json.dumps({
        "trial_id": "x-secret-2", "task_id": "x-secret-2", "reward": 0.0, "exit_status": "done",
        "started_at": "2026-12-01T00:00:00Z", "ended_at": "2026-12-01T00:00:01Z"}))
    result = CliRunner().invoke(app, ["rescue", "validation", "spreadsheet", "--run", f"base={tmp_path / 'run'}",
                                      "--out", str(tmp_path / "v.json"), "--data", str(data),
                                      "--split-file", str(split_file)])
    assert result.exit_code == 2
    assert "task_id: x-secret-2 is a test task; test tasks never feed a router" in result.output
    assert not (tmp_path / "v.json").exists()


def test_retrosynthesis_takes_the_file_split_over_the_file_names(tmp_path: Path) -> None:
    from unscaffold.benchmarks.retrosynthesis.baseline import template_baseline

    (tmp_path / "s.txt").write_text("train:\nrxn-003\ntest:\nrxn-001\nrxn-002\n")
    suite = load_suite("retrosynthesis", None, tmp_path / "s.txt")
    assert [(t.id, t.split) for t in suite.tasks("test")] == [("rxn-001", "test"), ("rxn-002", "test")]
    assert [t.id for t in suite.named_tasks(["rxn-003", "rxn-001"], "train")] == ["rxn-003"]
    assert template_baseline(suite, "test")["n"] == 2.0
