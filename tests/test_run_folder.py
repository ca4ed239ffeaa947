"""The run folder object: its paths, its typed reads and writes (byte for byte the layout other tools read),
a real run's folder, and the guard that no other module spells a run-folder name."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from tests.helpers import needs_bwrap
from unscaffold.errors import InputError
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.run.folder import RunFolder, TrialFolder
from unscaffold.run.models import RunConfig, RunResults, TrialResult
from unscaffold.run.runner import run

PACKAGE = Path(__file__).resolve().parent.parent / "unscaffold"
OWNER = PACKAGE / "run" / "folder.py"
# Folders of other kinds whose own files share a run folder's names.
NOT_RUN_FOLDERS = {
    "evolve/session.py": {"config.json"},  # an evolution folder's settings
    "offline/tiny.py": {"config.json"},  # a model checkpoint's
    "preflight.py": {"config.json"},  # a model checkpoint's
    "rescue/train.py": {"config.json", "pool"},  # a model checkpoint's; the training folder's settings and pool
    "reproduce/recipes.py": {"pool"},  # the reproduction folder's pool stage
}


def trial_result(trial_id: str, reward: float = 1.0) -> TrialResult:
    return TrialResult(trial_id=trial_id, task_id=trial_id.split("__")[0], reward=reward, exit_status="submitted",
                       started_at="2026-01-01T00:00:00Z", ended_at="2026-01-01T00:00:01Z")


def summary(**extra: object) -> RunResults:
    return RunResults(suite="retrosynthesis", student="oracle", harness="minimal", split=None, n_tasks=1, n_trials=1,
                      pass_at_1=100.0, mean_reward=1.0, per_task={"rxn-001": 1.0}, unscaffold_version="0", **extra)


def test_paths_are_the_documented_layout(tmp_path: Path) -> None:
    folder = RunFolder(str(tmp_path))
    assert folder == RunFolder(tmp_path) and folder.root == tmp_path
    assert [folder.config, folder.results, folder.events, folder.knowledge, folder.routing, folder.report,
            folder.trials_dir, folder.pool_dir, folder.probe_dir] == [
        tmp_path / "config.json", tmp_path / "results.json", tmp_path / "events.jsonl", tmp_path / "knowledge.json",
        tmp_path / "routing.json", tmp_path / "report.html", tmp_path / "trials", tmp_path / "pool",
        tmp_path / ".probe"]
    trial = folder.trial("rxn-001__2")
    assert trial == TrialFolder(tmp_path / "trials" / "rxn-001__2") and trial.id == "rxn-001__2"
    assert [trial.result, trial.trajectory, trial.reviews, trial.evidence, trial.atif] == [
        tmp_path / "trials" / "rxn-001__2" / name for name in
        ("result.json", "trajectory.json", "reviews.jsonl", "evidence.jsonl", "trajectory.atif.json")]
    assert folder.part("sib-a") == RunFolder(tmp_path / "by-harness" / "sib-a")
    assert RunFolder.FILES == ("config.json", "results.json", "events.jsonl", "knowledge.json", "routing.json",
                               "report.html", "result.json", "trajectory.json", "reviews.jsonl", "evidence.jsonl",
                               "trajectory.atif.json")
    assert RunFolder.FOLDERS == ("trials", "by-harness", "pool", ".probe")


def test_config_and_results_are_written_as_before(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    config = RunConfig(suite="retrosynthesis", student="oracle", out=tmp_path, task_ids=["rxn-001"])
    folder.write_config(config)
    assert folder.config.read_text() == json.dumps(config.model_dump(mode="json"), indent=2,
                                                   ensure_ascii=False) + "\n"
    assert folder.read_config() == config and folder.read_raw_config()["task_ids"] == ["rxn-001"]
    folder.write_results(summary())
    assert folder.results.read_text() == json.dumps(summary().model_dump(mode="json"), indent=2) + "\n"
    assert folder.read_results() == summary()
    routed = {**summary().model_dump(mode="json"), "router": "random", "harness_per_task": {"rxn-001": "base"}}
    folder.write_results(routed)  # a routed run's summary: the model's fields and its own
    assert json.loads(folder.results.read_text()) == routed
    assert folder.read_results().model_extra == {"router": "random", "harness_per_task": {"rxn-001": "base"}}


def test_trials_in_id_order_finished_or_not(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    for trial_id in ("b", "a", "c"):
        folder.trial(trial_id).root.mkdir(parents=True)
    folder.trial("b").write_result(trial_result("b", 0.5))
    folder.trial("a").write_result(trial_result("a"))
    assert folder.trial("a").result.read_text() == trial_result("a").model_dump_json(indent=2, exclude_none=True) + "\n"
    assert [t.id for t in folder.trials()] == ["a", "b", "c"]
    assert [t.id for t in folder.finished_trials()] == ["a", "b"]
    assert [(r.trial_id, r.reward) for r in folder.read_trial_results()] == [("a", 1.0), ("b", 0.5)]
    assert folder.trial("c").finished() is False and folder.trial("c").read_trajectory() is None
    assert folder.trial("c").read_evidence() is None
    folder.trial("c").reviews.touch()
    folder.trial("a").reviews.touch()
    assert folder.review_logs() == [folder.trial("a").reviews, folder.trial("c").reviews]
    traj = Trajectory(trial_id="a", task_id="a", suite="retrosynthesis", student="oracle", tools=[])
    traj.save(folder.trial("a").trajectory)
    assert folder.trial("a").read_trajectory() == traj


def test_knowledge_record(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    assert folder.read_knowledge() is None
    folder.write_knowledge(Path("/k/retrosynthesis"))
    assert json.loads(folder.knowledge.read_text()) == {"path": "/k/retrosynthesis"}
    assert folder.read_knowledge() == Path("/k/retrosynthesis")
    folder.knowledge.write_text('{"path": 3}')
    with pytest.raises(InputError) as info:
        folder.read_knowledge()
    assert str(info.value) == f"{folder.knowledge}: path: expected the K folder as a string"


def test_routed_run_and_its_parts(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    assert folder.routed() is False and folder.parts() == []
    folder.write_routing("random", {"t1": ["sib-b", "base"]})
    assert json.loads(folder.routing.read_text()) == {"router": "random", "rankings": {"t1": ["sib-b", "base"]}}
    for name in ("sib-b", "base", "empty"):
        folder.part(name).root.mkdir(parents=True)
    for name in ("sib-b", "base"):
        folder.part(name).write_config(RunConfig(suite="retrosynthesis", student="oracle", out=folder.part(name).root))
    assert folder.routed() is True
    assert folder.parts() == [folder.part("base"), folder.part("sib-b")]  # a part without a run is left out


@needs_bwrap
def test_a_reviewed_run_leaves_exactly_the_layout(tmp_path: Path) -> None:
    out = tmp_path / "run"
    config = RunConfig(suite="retrosynthesis", student="oracle", task_ids=["rxn-001"], out=out,
                       reviewer="passthrough")
    summary = run(config)
    folder = RunFolder(out)
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "events.jsonl", "knowledge.json", "results.json",
                                                     "trials"]
    assert sorted(p.name for p in folder.trial("rxn-001").root.iterdir()) == [
        "evidence.jsonl", "result.json", "reviews.jsonl", "trajectory.json", "workspace"]  # the suite's own
    assert folder.read_results() == summary and folder.read_config() == config
    assert [r.trial_id for r in folder.read_trial_results()] == ["rxn-001"]
    events = [json.loads(line)["event"] for line in folder.events.read_text().splitlines()]
    assert events == ["trial_started", "trial_finished"]


# ---------------------------------------------------------------- the guard: one owner of the names


def spellings(source: str) -> list[tuple[int, str]]:
    """(line, name) of each run-folder name `source` spells in code: a string (not a docstring, not prose with
    spaces) that is a name or a path holding one, or a folder name joined onto a path with `/`."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant) \
                and node.right.value in RunFolder.FOLDERS:
            found.append((node.lineno, node.right.value))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings \
                and not re.search(r"\s", node.value):
            segments = node.value.split("/")
            found += [(node.lineno, s) for s in segments if s in RunFolder.FILES]
            found += [(node.lineno, s) for s in segments[:-1] if s in RunFolder.FOLDERS]
    return sorted(set(found))


def test_the_guard_finds_each_way_of_spelling_a_name() -> None:
    source = ('"""Reads trials/ID/result.json."""\n'
              'a = run / "trials" / tid / "result.json"\n'
              'b = sorted(run.glob("trials/*/reviews.jsonl"))\n'
              'c = f"{out / \'report.html\'}"\n'
              'd = {"trials": 3, "note": "no results.json here"}\n')
    assert spellings(source) == [(2, "result.json"), (2, "trials"), (3, "reviews.jsonl"), (3, "trials"),
                                 (4, "report.html")]


def test_no_module_but_the_run_folder_spells_a_run_folder_name() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == OWNER:
            continue
        allowed = NOT_RUN_FOLDERS.get(str(path.relative_to(PACKAGE)), set())
        found += [f"{path.relative_to(PACKAGE.parent)}:{line}: {name}"
                  for line, name in spellings(path.read_text(encoding="utf-8")) if name not in allowed]
    assert found == []
