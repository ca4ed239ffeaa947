"""Adding a suite is adding a folder: a copy of a built-in suite's folder under a new name, on the suite search
path, runs through the command line with no other edit, and scores as the original does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import on_suite_path
from unscaffold.errors import InputError
from unscaffold.knowledge.bank import load_bank
from unscaffold.rescue.pool import load_pool
from unscaffold.suites import SEARCH_PATH, find, names, predicates, suite_folder

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "unscaffold.cli"]
TASKS = "rxn-001,rxn-002,rxn-003"


def copy_suite(source: str, root: Path, name: str) -> Path:
    folder = root / name
    shutil.copytree(suite_folder(source), folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def run_oracle(suite: str, out: Path, search_path: Path) -> dict[str, object]:
    env = {**os.environ, SEARCH_PATH: str(search_path)}
    done = subprocess.run([*CLI, "run", suite, "--student", "oracle", "--tasks", TASKS, "--sandbox", "none",
                           "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    results: dict[str, object] = json.loads((out / "results.json").read_text())
    return results


def test_a_copied_suite_folder_runs_under_its_new_name(tmp_path: Path) -> None:
    folder = copy_suite("retrosynthesis", tmp_path / "suites", "retro_copy")
    assert not [p for p in folder.glob("*.py") if "from unscaffold.benchmarks.retrosynthesis" in p.read_text()]
    original = run_oracle("retrosynthesis", tmp_path / "original", tmp_path / "suites")
    copied = run_oracle("retro_copy", tmp_path / "copied", tmp_path / "suites")
    assert (copied["suite"], original["suite"]) == ("retro_copy", "retrosynthesis")
    assert copied["per_task"] == original["per_task"] == {"rxn-001": 1.0, "rxn-002": 1.0, "rxn-003": 1.0}
    assert copied["pass_at_1"] == original["pass_at_1"] == 100.0
    trajectory = json.loads(next((tmp_path / "copied" / "trials").glob("*/trajectory.json")).read_text())
    assert trajectory["suite"] == "retro_copy"


def test_the_copy_is_its_own_folder_with_its_own_modules(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The copy's suite, scorer and bank are the copy's files; its detectors are the original's predicates
    (the same file), so they are one predicate each, and the bank's detectors name them."""
    folder = copy_suite("retrosynthesis", tmp_path, "retro_copy")
    on_suite_path(monkeypatch, tmp_path)
    entry = find("retro_copy")
    assert names() == ["appworld", "appworld_lite", "harbor", "retro_copy", "retrosynthesis", "spreadsheet"]
    assert (entry.folder, entry.bank, entry.k, entry.pool) == (folder, folder / "hstar", folder / "k",
                                                               folder / "pool" / "pool.toml")
    suite = entry.suite_class()()
    assert (suite.name, suite.bank_path()) == ("retro_copy", folder / "hstar")
    assert Path(sys.modules["retro_copy.chem"].__file__ or "") == folder / "chem.py"
    assert predicates()["answer_written"].__module__ == "unscaffold.benchmarks.retrosynthesis.detectors"
    assert load_bank(entry.bank).detectors() == load_bank(find("retrosynthesis").bank).detectors()
    assert entry.pool is not None  # the copy's pool.toml names no suite: it is the copy's
    assert load_pool(entry.pool).suite == "retro_copy"


def test_a_copy_that_changes_a_predicate_must_rename_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    folder = copy_suite("retrosynthesis", tmp_path, "retro_copy")
    with (folder / "detectors.py").open("a") as f:
        f.write("\n# changed\n")
    on_suite_path(monkeypatch, tmp_path)
    with pytest.raises(InputError) as err:
        predicates()
    original = suite_folder("retrosynthesis") / "detectors.py"
    assert str(err.value) == (f"{folder / 'detectors.py'}: PREDICATES: predicate 'candidates_listed' is also "
                              f"{original}'s, with other code; give it another name")


def test_a_declaration_is_checked_and_names_are_unique(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    folder = copy_suite("retrosynthesis", tmp_path, "retro_copy")
    sheets = suite_folder("spreadsheet")
    on_suite_path(monkeypatch, tmp_path)
    (folder / "suite.toml").write_text('description = "d"\nsuite = "suite:RetrosynthesisSuite"\nbank = "../x"\n')
    with pytest.raises(InputError) as err:
        find("retro_copy")
    assert str(err.value) == (f"{folder / 'suite.toml'}: bank: Value error, '../x' must be a path inside the "
                              "suite folder")
    (folder / "suite.toml").write_text('name = "spreadsheet"\ndescription = "d"\nsuite = "suite:RetrosynthesisSuite"\n')
    with pytest.raises(InputError) as err:
        find("retro_copy")
    assert str(err.value) == f"{folder / 'suite.toml'}: name: suite name 'spreadsheet' is also {sheets}'s"


@pytest.mark.parametrize("source", ["appworld_lite", "spreadsheet"])
def test_a_copy_of_each_self_contained_suite_makes_the_same_tasks_from_its_own_files(
        source: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from unscaffold.benchmarks import load_suite

    with load_suite(source) as suite:
        original = [(t.id, t.instruction) for t in suite.tasks("train")]
    folder = copy_suite(source, tmp_path, "copied")
    on_suite_path(monkeypatch, tmp_path)
    with load_suite("copied") as copy:
        assert [(t.id, t.instruction) for t in copy.tasks("train")] == original
        assert (copy.name, copy.bank_path()) == ("copied", folder / "hstar")
    loaded = {name: Path(m.__file__ or "") for name, m in sys.modules.items() if name.partition(".")[0] == "copied"}
    assert len(loaded) > 3 and all(path.is_relative_to(folder) for path in loaded.values()), loaded
    own = find(source).package  # the suite's modules import each other relatively (bank sources aside)
    absolute = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.py") if "bank_src" not in p.parts
                      and "hstar" not in p.parts and f"from {own}" in p.read_text())
    assert absolute == []


def test_a_search_path_that_is_no_folder_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(SEARCH_PATH, str(tmp_path / "missing"))
    with pytest.raises(InputError) as err:
        find("retrosynthesis")
    assert str(err.value) == f"UNSCAFFOLD_SUITE_PATH: {tmp_path / 'missing'} is not a folder"
    assert names(built_in_only=True) == ["appworld", "appworld_lite", "harbor", "retrosynthesis", "spreadsheet"]


def test_suites_lists_every_folder_with_its_parts_and_where_it_comes_from(tmp_path: Path) -> None:
    folder = copy_suite("retrosynthesis", tmp_path / "suites", "retro_copy")
    env = {**os.environ, SEARCH_PATH: str(tmp_path / "suites")}
    done = subprocess.run([*CLI, "suites", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    listed = {row["name"]: row for row in json.loads(done.stdout)}
    assert {name: (row["aliases"], row["built_in"], row["own_data"], row["parts"]) for name, row in listed.items()} == {
        "appworld": (["appworld_real"], True, True, ["bank", "k", "pool", "image"]),
        "appworld_lite": ([], True, False, ["bank", "k", "pool", "detectors", "image"]),
        "harbor": ([], True, True, ["detectors"]),
        "retro_copy": ([], False, True, ["bank", "k", "pool", "detectors", "image"]),
        "retrosynthesis": ([], True, True, ["bank", "k", "pool", "detectors", "image"]),
        "spreadsheet": ([], True, True, ["bank", "k", "pool", "detectors", "image"])}
    assert listed["retro_copy"]["folder"] == str(folder)
    assert listed["retro_copy"]["description"] == listed["retrosynthesis"]["description"]
    table = subprocess.run([*CLI, "suites", "--search", str(tmp_path / "suites")], cwd=ROOT,
                           env={**os.environ, "COLUMNS": "80"}, capture_output=True, text=True, timeout=120)
    assert table.returncode == 0 and "(6\nrows, one block each)\n- suite: appworld (appworld_real)\n" in table.stdout
    block = "".join(table.stdout.split()).partition("-suite:retro_copy")[2]  # folded at 80 columns
    assert block.startswith(f"from:{folder}") and "parts:bank,k,pool,detectors,image" in block.partition("-suite:")[0]
    missing = subprocess.run([*CLI, "suites", "--search", str(tmp_path / "nowhere")], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
    assert (missing.returncode, missing.stderr) == (2, f"error: --search: {tmp_path / 'nowhere'} is not a folder\n")
