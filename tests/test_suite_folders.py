"""A suite is a folder: each built-in suite's parts (README, suite module, h* bank, K, sibling pool, image
requirements) lie in its folder, which declares them in its suite.toml and the registry finds by looking."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from unscaffold.benchmarks import load_suite
from unscaffold.errors import InputError
from unscaffold.rescue.pool import load_pool
from unscaffold.suites import entries, find, names, suite_folder

PACKAGE = Path(__file__).resolve().parent.parent / "unscaffold"
SELF_CONTAINED = ("retrosynthesis", "spreadsheet", "appworld_lite")  # need no --data


def test_each_suite_name_has_its_folder() -> None:
    assert {name: suite_folder(name).relative_to(PACKAGE).as_posix() for name in names()} == {
        "harbor": "benchmarks/harbor", "spreadsheet": "benchmarks/spreadsheet",
        "retrosynthesis": "benchmarks/retrosynthesis", "appworld_lite": "offline/appworld_lite",
        "appworld": "benchmarks/appworld_real"}
    assert find("appworld_real") is find("appworld")  # the folder's name finds it too (an alias)
    assert [e.name for e in entries() if e.user_data] == ["appworld", "harbor", "retrosynthesis", "spreadsheet"]


def test_an_unknown_suite_is_one_line_naming_the_close_one() -> None:
    with pytest.raises(InputError) as err:
        suite_folder("nope")
    assert str(err.value) == "SUITE: unknown suite 'nope'; known: appworld, appworld_lite, harbor, retrosynthesis, " \
                             "spreadsheet"
    with pytest.raises(InputError) as err:
        load_suite("retrosynthesys")
    assert str(err.value) == "SUITE: unknown suite 'retrosynthesys'; known: appworld, appworld_lite, harbor, " \
                             "retrosynthesis, spreadsheet; did you mean retrosynthesis?"
    with pytest.raises(InputError, match=r"^--split-file: suite 'appworld_lite' generates its own tasks and splits; "
                                         r"split files are for real data \(appworld, harbor, retrosynthesis, "
                                         r"spreadsheet\)$"):
        load_suite("appworld_lite", split_file=Path("splits.toml"))


@pytest.mark.parametrize("name", names())
def test_a_suite_folder_holds_its_parts(name: str) -> None:
    entry = find(name)
    assert (entry.folder / "README.md").is_file() and (entry.folder / "suite.toml").is_file()
    assert entry.suite_class().__module__ == f"{entry.package}.suite"
    for part in (entry.pool, entry.image, entry.cases):
        assert part is None or (part.is_file() and part.is_relative_to(entry.folder)), part
    if entry.pool is not None:
        assert "suite" not in tomllib.loads(entry.pool.read_text()) and load_pool(entry.pool).suite == name
    for part in (entry.bank, entry.k):
        assert part is None or part.is_dir(), part
    assert entry.pool is None or entry.bank is not None  # a sibling is an edit of the suite's bank


@pytest.mark.parametrize("name", SELF_CONTAINED)
def test_the_bank_and_k_a_suite_serves_are_in_its_folder(name: str) -> None:
    with load_suite(name) as suite:
        bank, k = suite.bank_path(), suite.k_path()
        assert suite.name == name
    assert bank == suite_folder(name) / "hstar" and k == suite_folder(name) / "k"
    assert (bank / "manifest.toml").is_file() and (bank / "detector_cases.toml").is_file()
    assert (k / "index.json").is_file()
    assert find(name).cases == bank / "detector_cases.toml"


def test_real_appworld_serves_the_app_world_bank() -> None:
    real, lite = find("appworld"), find("appworld_lite")
    assert (real.bank, real.k, real.cases) == (lite.bank, lite.k, None)


def test_split_guesses_the_suite_from_the_marks_each_folder_declares(tmp_path: Path) -> None:
    from unscaffold.benchmarks.splits import guess_suite

    layouts = {"spreadsheet": ["dataset.json"], "retrosynthesis": ["raw_test.csv"],
               "appworld": ["data/datasets/train.txt"], "harbor": ["t1/task.toml"]}
    for name, files in layouts.items():
        for file in files:
            (tmp_path / name / file).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name / file).write_text("")
        assert guess_suite(tmp_path / name) == name
    assert guess_suite(tmp_path / "retrosynthesis" / "raw_test.csv") == "retrosynthesis"
    (tmp_path / "spreadsheet" / "extra.csv").write_text("")
    with pytest.raises(InputError) as err:
        guess_suite(tmp_path / "spreadsheet")
    assert str(err.value) == (f"{tmp_path / 'spreadsheet'}: suites retrosynthesis, spreadsheet could each read this "
                              "data; pass --suite")
    (tmp_path / "none").mkdir()
    with pytest.raises(InputError) as err:
        guess_suite(tmp_path / "none")
    assert str(err.value) == (f"{tmp_path / 'none'}: cannot tell which suite reads this data (none of data/datasets, "
                              "task.toml, */task.toml, *.csv, dataset.json); pass --suite")
