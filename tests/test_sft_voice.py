"""Reviewer voice never reaches the loss: the common forms a replacement takes when the reviewer writes
about the student ("The student forgot to validate ...", "I replace the finish", "the proposal ...")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_build_sft import _traj
from unscaffold.sft.build import build_sft
from unscaffold.sft.scrub import REVIEWER_WORDING

VOICED = [
    "The student is about to finish without checking the output; I replace the finish with a check.",
    "The student forgot to validate the SMILES before writing answer.txt.",
    "The proposal ends the episode without evidence of a write.",
    "I keep most of the proposal but add a header check.",
    "The student hasn't looked at the second sheet yet.",
    "Unlike the student's plan, I read the sheet first.",
    "I'm rejecting this step: it deletes the input.",
]
PLAIN = [
    "The student grades are filled in D2:D20.",
    "I'll replace the formula in C2 with the literal value.",
    "The student missed 3 classes, so the student responses are blank.",
    "The proposal sheet lists 12 items.",
    "Each student forgot nothing: the attendance column is full.",
]


@pytest.mark.parametrize("text", VOICED)
def test_reviewer_voice_is_recognised(text: str) -> None:
    assert REVIEWER_WORDING.search(text)


@pytest.mark.parametrize("text", PLAIN)
def test_task_words_are_not_reviewer_voice(text: str) -> None:
    assert not REVIEWER_WORDING.search(text)


def write_trial(run: Path, trial_id: str, traj: dict) -> None:
    folder = run / "trials" / trial_id
    folder.mkdir(parents=True)
    traj.update(trial_id=trial_id, task_id=trial_id)
    (folder / "trajectory.json").write_text(json.dumps(traj))
    (folder / "reviews.jsonl").write_text("")
    (folder / "result.json").write_text(json.dumps({"reward": 1.0, "outcome": "passed"}))


def replaced_final(content: str, reasoning: str | None = None):
    def change(t: dict) -> None:
        t["messages"][4]["content"] = content
        if reasoning:
            t["messages"][4]["reasoning_content"] = reasoning
        t["steps"][1]["replaced"] = True
        t["final_answer"] = content
    return change


def test_voiced_text_drops_the_row_and_voiced_reasoning_is_never_trained(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_trial(run, "a-text", _traj(replaced_final("The student forgot to validate the file; it holds 3 rows.")))
    write_trial(run, "b-text", _traj(replaced_final("I replace the finish: the file holds 3 rows.")))
    write_trial(run, "c-reasoning", _traj(replaced_final(
        "The file holds 3 rows.", "The student is about to finish without a check; I replace the finish.")))
    write_trial(run, "d-plain", _traj(replaced_final("The file holds 3 rows.", "I count the rows once more.")))
    report = build_sft([run], tmp_path / "d.jsonl")
    assert (report.trials, report.kept, report.masked_reasoning_turns) == (4, 2, 1)
    assert report.dropped == {"reviewer_wording_in_content": 2}
    assert [(d.trial_id, d.reason, d.marker) for d in report.drops] == [
        ("a-text", "reviewer_wording_in_content", "The student forgot"),
        ("b-text", "reviewer_wording_in_content", "I replace the finish")]
    rows = {r["trial_id"]: r for r in map(json.loads, (tmp_path / "d.jsonl").read_text().splitlines())}
    assert rows["c-reasoning"]["masked_reasoning_turns"] == [4]
    assert rows["d-plain"]["masked_reasoning_turns"] == []
