"""`unscaffold run SUITE --reviewer ... --knowledge K --budget N` on the Harbor examples: exact counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import EXAMPLES, HARBOR_EXAMPLES, HARBOR_REPLAY, call, final, needs_bwrap
from unscaffold.errors import InputError
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run

pytestmark = needs_bwrap
K = EXAMPLES / "hstar" / "harbor_k"
REVIEWER = EXAMPLES / "replay" / "harbor_reviewer.json"


def collect(out: Path, reviewer: str, budget: int, student: str = f"replay:{HARBOR_REPLAY}", **kw):
    return run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student=student, reviewer=reviewer, knowledge=K,
                         budget=budget, out=out, concurrency=2, **kw))


def test_reviewed_collection_counts_and_privacy(tmp_path: Path) -> None:
    summary = collect(tmp_path, f"replay:{REVIEWER}", budget=5)
    assert summary.per_task == {"csv-total": 1.0, "fix-fibonacci": 1.0, "hello-file": 1.0, "word-stats": 1.0}
    assert summary.reviewer_calls == 10  # one per proposal: 3 + 3 + 2 + 2
    assert summary.replacements == 2
    assert summary.replacements_per_trial == {"csv-total": 0, "fix-fibonacci": 1, "hello-file": 0, "word-stats": 1}
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["reviewer_calls"] == 10 and results["replacements"] == 2 and results["budget"] == 5
    trial = tmp_path / "trials" / "word-stats"
    visible = (trial / "trajectory.json").read_text()
    reviews = [json.loads(line) for line in (trial / "reviews.jsonl").read_text().splitlines()]
    assert [r["decision"] for r in reviews] == ["REPLACE", "PASS"]
    assert reviews[0]["components_used"] == ["memory:tie-order"]
    assert "sort -rn" in reviews[0]["proposal"]["tool_calls"][0]["arguments"]["command"]
    for private in ("memory:tie-order", "arbitrary order", "sort -rn", "REPLACE"):
        assert private not in visible
    assert "sort -k1,1nr -k2,2" in visible


def test_budget_zero_never_calls_the_reviewer(tmp_path: Path) -> None:
    summary = collect(tmp_path, f"replay:{REVIEWER}", budget=0)
    assert summary.reviewer_calls == 0 and summary.replacements == 0
    assert summary.pass_at_1 == 50.0
    lines = (tmp_path / "trials" / "csv-total" / "reviews.jsonl").read_text().splitlines()
    assert [json.loads(x)["skipped"] for x in lines] == ["budget", "budget", "budget"]


def test_budget_one_with_two_replace_entries(tmp_path: Path, write_replay) -> None:
    replace = {"decision": "REPLACE", "reason": "bounded",
               "replacement": {"tool_call": {"name": "execute", "arguments": {"command": "echo replaced >> log.txt"}}}}
    reviewer = write_replay({"hello-file": [replace, replace, {"decision": "PASS", "reason": "ok"}]}, "rev.json")
    student = write_replay({"hello-file": [call("echo a >> log.txt"), call("echo b >> log.txt"),
                                           call("echo c >> log.txt"), final("done")]}, "student.json")
    summary = collect(tmp_path, reviewer, budget=1, student=student, task_ids=["hello-file"],
                      sandbox={"keep_workspace": True})  # the log is read from the workspace afterwards
    assert summary.replacements == 1
    assert summary.reviewer_calls == 1  # after the one REPLACE the budget is spent: no more calls
    log = (tmp_path / "trials" / "hello-file" / "workspace" / "log.txt").read_text()
    assert log == "replaced\nb\nc\n"


def test_rules_reviewer_replaces_an_unsupported_finish_with_a_recipe(tmp_path: Path, write_replay) -> None:
    student = write_replay({"hello-file": [call("echo 'Hello, world!' > /app/hello.txt"), final("done"),
                                           final("done, and shown")]})
    summary = collect(tmp_path, "rules", budget=5, student=student, task_ids=["hello-file"])
    assert summary.replacements == 1 and summary.reviewer_calls == 0
    traj = json.loads((tmp_path / "trials" / "hello-file" / "trajectory.json").read_text())
    replaced = traj["messages"][4]
    command = replaced["tool_calls"][0]["function"]["arguments"]["command"]
    assert command.startswith("python3 - '{\"path\": \"/app/hello.txt\"}' <<'UNSCAFFOLD_RECIPE'")
    assert traj["messages"][5]["content"] == ("    1  Hello, world!\n[/app/hello.txt: 14 bytes, 1 lines]\n\n"
                                              "[exit_code=0]")
    assert traj["final_answer"] == "done, and shown"
    review = json.loads((tmp_path / "trials" / "hello-file" / "reviews.jsonl").read_text().splitlines()[1])
    assert review["hints"][0]["component_id"] == "check:show_before_finish"


def test_knowledge_without_reviewer_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--knowledge: K is read by the reviewer: pass --reviewer too"):
        run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student="oracle", knowledge=K, out=tmp_path))


def test_k_that_leaks_a_task_id_is_refused(tmp_path: Path) -> None:
    import shutil

    leaky = tmp_path / "K"
    shutil.copytree(K, leaky)
    with open(leaky / "memory.md", "a") as f:
        f.write("\nFor csv-total the answer is 43.25.\n")
    with pytest.raises(InputError, match="K leaks the suite's answers: memory.md contains 'csv-total'"):
        run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student="oracle", reviewer="passthrough",
                      knowledge=leaky, out=tmp_path / "run"))


def test_run_under_hstar_bank_offers_its_tools(tmp_path: Path, write_replay) -> None:
    student = write_replay({"csv-total": [
        {"tool_call": {"name": "column_totals", "arguments": {"path": "sales.csv", "key": "region"}}},
        call("echo 43.25 > answer.txt"),
        final("43.25"),
    ]})
    summary = run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student=student, out=tmp_path,
                            task_ids=["csv-total"], harness=str(EXAMPLES / "hstar" / "harbor_bank")))
    assert summary.per_task == {"csv-total": 1.0} and summary.harness.endswith("harbor_bank")
    traj = json.loads((tmp_path / "trials" / "csv-total" / "trajectory.json").read_text())
    assert traj["harness"] == "hstar"
    assert traj["messages"][3]["content"] == ("columns: region, amount\nrows: 6\neast: amount=4.10\n"
                                              "north: amount=43.25\nsouth: amount=107.25\n\n[exit_code=0]")


def test_hstar_without_a_suite_bank_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--harness: this suite ships no h\\* bank; pass --harness PATH"):
        run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student="oracle", out=tmp_path, harness="hstar"))
