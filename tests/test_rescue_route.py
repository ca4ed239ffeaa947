"""Validation tables from real runs, and rank-1 routing at inference."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tests.helpers import needs_bwrap
from unscaffold.benchmarks import load_suite
from unscaffold.cli import app


def tasks(split: str, n: int) -> list[str]:
    return [t.id for t in load_suite("appworld_lite").tasks(split)[:n]]


@needs_bwrap
def test_validation_table_then_rank_one_routing(tmp_path: Path, write_replay) -> None:
    train = tasks("train", 2)
    runner = CliRunner()
    pool = tmp_path / "pool"
    assert runner.invoke(app, ["rescue", "pool", "appworld_lite", "--out", str(pool)]).exit_code == 0
    # base fails every validation task (a replay that gives up), the sibling docs-first passes them (oracle)
    give_up = write_replay({"*": [{"content": "I cannot do this."}]})
    for name, student, harness in (("base", give_up, "minimal"), ("docs-first", "oracle", str(pool / "docs-first"))):
        result = runner.invoke(app, ["run", "appworld_lite", "--student", student, "--harness", harness,
                                     "--tasks", ",".join(train), "--out", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
    table_path = tmp_path / "table.json"
    result = runner.invoke(app, ["rescue", "validation", "appworld_lite", "--run", f"base={tmp_path / 'base'}",
                                 "--run", f"docs-first={tmp_path / 'docs-first'}", "--out", str(table_path)])
    assert result.exit_code == 0, result.output
    table = json.loads(table_path.read_text())
    assert [t["task_id"] for t in table["tasks"]] == sorted(train)
    assert table["tasks"][0]["rewards"] == {"base": [0.0], "docs-first": [1.0]}
    assert table["tasks"][0]["transcripts"]["base"] == ""  # the replay ran no command
    assert table["tasks"][0]["transcripts"]["docs-first"].startswith("$ ")

    out = tmp_path / "routed"
    test_ids = tasks("test", 2)
    result = runner.invoke(app, ["rescue", "route", "appworld_lite", "--student", "oracle", "--router", "rule",
                                 "--validation", str(table_path), "--tasks", ",".join(test_ids), "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "results.json").read_text())
    assert summary["harness_per_task"] == dict.fromkeys(test_ids, "docs-first")
    assert summary["pass_at_1"] == 100.0 and summary["harness"].startswith("route:")
    assert sorted(p.name for p in (out / "by-harness").iterdir()) == ["docs-first"]
    rankings = json.loads((out / "routing.json").read_text())["rankings"]
    assert rankings[test_ids[0]][:2] == ["docs-first", "base"]

    # the same routing from `unscaffold run --harness route:POOL --router R`
    via_run = tmp_path / "via-run"
    result = runner.invoke(app, ["run", "appworld_lite", "--student", "oracle", "--harness",
                                 "route:shipped", "--router", "rule", "--router-validation",
                                 str(table_path), "--tasks", ",".join(test_ids), "--out", str(via_run)])
    assert result.exit_code == 0, result.output
    again = json.loads((via_run / "results.json").read_text())
    assert again["harness_per_task"] == summary["harness_per_task"] and again["pass_at_1"] == 100.0
    assert "rank-1 routing (rule router)" in result.output

    # a routed run reads back as one run for `compare`/`behaviors`: its trials live in by-harness/NAME
    from unscaffold.behaviors.runs import load_run

    record = load_run(via_run)
    assert sorted(t.task_id for t in record.trials) == sorted(test_ids)
    assert record.config.harness.kind == "route" and record.label().harness == "routed (rule)"
    assert all(record.trajectory(t) is not None for t in record.trials)

    # the trained router: a router.json (here an adaptive router whose voter ranks docs-first first)
    from unscaffold.rescue.profiles import AdaptiveRouter
    from unscaffold.rescue.router_state import save_router
    from unscaffold.rescue.routers import TaskView
    from unscaffold.rescue.validation import load_table

    voter = write_replay({"*": [{"tool_call": {"name": "submit_ranking", "arguments": {
        "ranking": ["docs-first", "base"]}}}] * 2}, name="voter.json")
    siblings = sorted(p.name for p in pool.iterdir() if p.is_dir())
    adaptive = AdaptiveRouter.from_specs(siblings, load_table(table_path), [], [voter])
    state = tmp_path / "router.json"
    save_router(adaptive, state, [TaskView(task_id=t, text=t) for t in test_ids], voters=[voter])
    via_state = tmp_path / "via-state"
    result = runner.invoke(app, ["run", "appworld_lite", "--student", "oracle", "--harness", "route:shipped",
                                 "--router", str(state), "--tasks", ",".join(test_ids), "--out", str(via_state)])
    assert result.exit_code == 0, result.output
    assert json.loads((via_state / "results.json").read_text())["harness_per_task"] == dict.fromkeys(test_ids,
                                                                                                 "docs-first")
    assert "rank-1 routing (adaptive router)" in result.output


def test_a_router_without_a_route_harness_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", "appworld_lite", "--student", "oracle", "--router", "rule",
                                      "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert result.output.strip().endswith("error: --router: routing needs --harness route:POOL")


def test_validation_refuses_test_tasks(tmp_path: Path) -> None:
    trial = tmp_path / "run" / "trials" / "x"
    trial.mkdir(parents=True)
    test_id = tasks("test", 1)[0]
    (trial / "result.json").write_text(json.dumps({"trial_id": "x", "task_id": test_id, "reward": 1.0,
                                                   "exit_status": "submitted", "started_at": "", "ended_at": ""}))
    result = CliRunner().invoke(app, ["rescue", "validation", "appworld_lite", "--run", f"base={tmp_path / 'run'}",
                                      "--out", str(tmp_path / "t.json")])
    assert result.exit_code == 2
    assert f"task_id: {test_id} is a test task; test tasks never feed a router" in result.output


def test_route_with_the_router_of_a_none_run_is_one_line(tmp_path: Path) -> None:
    """A plain-GRPO run (`--router none`) leaves a router.json that ranks nothing: routing with it is refused."""
    from unscaffold.rescue.router_state import save_router
    from unscaffold.rescue.routers import ControlRouter

    state = tmp_path / "router.json"
    save_router(ControlRouter("none", []), state, [])
    result = CliRunner().invoke(app, ["rescue", "route", "appworld_lite", "--student", "oracle", "--router",
                                      str(state), "--tasks", tasks("test", 1)[0], "--no-preflight", "--out",
                                      str(tmp_path / "routed")])
    assert (result.exit_code, result.output) == (2, f"error: {state}: router: a `none` run (plain GRPO) has no "
                                                    "router to route with; train with a router (random, rule or "
                                                    "adaptive) or name one\n")
