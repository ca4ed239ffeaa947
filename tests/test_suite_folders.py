"""A suite is a folder: each built-in suite's parts (README, suite, h* bank, K, sibling pool, image
requirements) lie under `benchmarks/<folder>/`, which the registry finds by the suite's name."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from unscaffold.benchmarks import load_suite
from unscaffold.benchmarks.registry import SUITES, suite_folder
from unscaffold.errors import InputError

BENCHMARKS = Path(__file__).resolve().parent.parent / "unscaffold" / "benchmarks"
OWN_IMAGE = {"harbor"}  # each task brings its environment's Dockerfile
NO_POOL = {"harbor"}  # no bank to make siblings of
SELF_CONTAINED = ("retrosynthesis", "spreadsheet", "appworld_lite")  # need no --data


def test_each_suite_name_has_its_folder() -> None:
    assert {name: suite_folder(name).relative_to(BENCHMARKS.parent).as_posix() for name in SUITES} == {
        "harbor": "benchmarks/harbor", "spreadsheet": "benchmarks/spreadsheet",
        "retrosynthesis": "benchmarks/retrosynthesis",
        "appworld_lite": "offline/appworld_lite", "appworld": "benchmarks/appworld_real"}
    with pytest.raises(InputError, match=r"^SUITE: unknown suite 'nope'; known: appworld, appworld_lite, harbor"):
        suite_folder("nope")


@pytest.mark.parametrize("name", sorted(SUITES))
def test_a_suite_folder_holds_its_parts(name: str) -> None:
    folder = suite_folder(name)
    assert (folder / "README.md").is_file() and (folder / "suite.py").is_file()
    assert (folder / "image" / "requirements.txt").is_file() == (name not in OWN_IMAGE)
    pool = folder / "pool" / "pool.toml"
    assert pool.is_file() == (name not in NO_POOL)
    if pool.is_file():
        assert tomllib.loads(pool.read_text())["suite"] == name


@pytest.mark.parametrize("name", SELF_CONTAINED)
def test_the_bank_and_k_a_suite_serves_are_in_its_folder(name: str) -> None:
    with load_suite(name) as suite:
        bank, k = suite.bank_path(), suite.k_path()
    assert bank == suite_folder(name) / "hstar" and k == suite_folder(name) / "k"
    assert (bank / "manifest.toml").is_file() and (bank / "detector_cases.toml").is_file()
    assert (k / "index.json").is_file()

