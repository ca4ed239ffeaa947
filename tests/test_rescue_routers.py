"""Routers on a fixed validation table: random, rule (nearest validation tasks), adaptive (LLM votes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from unscaffold.rescue.profiles import AdaptiveRouter
from unscaffold.rescue.routers import RandomRouter, RuleRouter, TaskView, pick, prefers_base
from unscaffold.rescue.validation import ValidationTable, ValidationTask, similarity

SIBLINGS = ["pages", "docs", "guard"]


def table() -> ValidationTable:
    def row(tid: str, text: str, **rates: list[float]) -> ValidationTask:
        return ValidationTask(task_id=tid, text=text, rewards=rates,
                              transcripts={h: f"$ cmd-{h}" for h in rates})

    return ValidationTable(tasks=[
        row("v1", "count all songs in the music library", base=[0, 0], pages=[1, 1], docs=[0, 0], guard=[0, 1]),
        row("v2", "count all contacts who are friends", base=[0, 0], pages=[1, 0], docs=[0, 0], guard=[0, 0]),
        row("v3", "create a playlist and add songs", base=[1, 1], pages=[0, 0], docs=[1, 0], guard=[1, 1]),
        row("v4", "delete the note titled groceries", base=[0, 0], pages=[0, 0], docs=[1, 1], guard=[0, 0]),
    ])


def test_similarity_is_word_jaccard() -> None:
    assert similarity("Count all songs", "count all SONGS") == 1.0
    assert similarity("count all songs", "count the notes") == pytest.approx(1 / 5)


def test_rule_router_on_fixed_table() -> None:
    router = RuleRouter(SIBLINGS, table(), neighbours=2)
    task = TaskView(task_id="t", text="count all songs in my library")
    assert router.nearest(task) == ["v1", "v2"]
    assert router.scores(task) == {"base": 0.0, "pages": 0.75, "docs": 0.0, "guard": 0.25}
    assert router.rank(task) == ["pages", "guard", "base", "docs"]
    assert pick(router, task, 5) == ["pages", "guard", "docs", "pages", "guard"]
    playlist = TaskView(task_id="t2", text="create a playlist")
    assert RuleRouter(SIBLINGS, table(), neighbours=1).rank(playlist)[0] == "base"
    assert prefers_base(RuleRouter(SIBLINGS, table(), neighbours=1), playlist) is None  # base and guard tie at 1.0


def test_random_router_is_seeded_per_task() -> None:
    a, b = RandomRouter(SIBLINGS, seed=1), RandomRouter(SIBLINGS, seed=1)
    t1 = TaskView(task_id="x", text="")
    assert a.rank(t1) == b.rank(t1) and sorted(a.rank(t1)) == sorted(SIBLINGS)
    assert len({tuple(a.rank(TaskView(task_id=str(i), text=""))) for i in range(20)}) > 1


def test_test_tasks_never_feed_a_router() -> None:
    with pytest.raises(ValidationError, match="test tasks never feed a router"):
        ValidationTask(task_id="x", text="", split="test", rewards={})


def profile_call(prefer: str) -> dict:
    return {"tool_call": {"name": "submit_profile", "arguments": {
        "prefer": [{"when": prefer, "behavior": "pages on"}], "avoid": []}}}


def vote(*names: str) -> dict:
    return {"tool_call": {"name": "submit_ranking", "arguments": {"ranking": list(names)}}}


def test_adaptive_router_profiles_votes_and_reanchors(tmp_path: Path) -> None:
    one = tmp_path / "one.json"
    one.write_text(json.dumps({
        "profile:pages": [profile_call("the task counts every item of a list")],
        "profile:docs": [{"content": "no tool call"}, profile_call("the task deletes an entity")],
        "profile:guard": [profile_call("a write must be read back")],
        "vote:t": [vote("docs", "pages", "nope")],
    }))
    two = tmp_path / "two.json"
    two.write_text(json.dumps({"vote:t": [vote("pages", "guard")], "*": [profile_call("x")]}))
    router = AdaptiveRouter.from_specs(SIBLINGS, table(), [f"replay:{one}"], [f"replay:{one}", f"replay:{two}"])
    assert router.profiles["pages"].prefer[0].when == "the task counts every item of a list"
    assert router.profiles["docs"].prefer[0].when == "the task deletes an entity"  # second try after an error
    # Borda over 4 candidates: pages 3 + 4 = 7, docs 4, guard 3, base 0
    assert router.rank(TaskView(task_id="t", text="count all songs")) == ["pages", "docs", "guard", "base"]
    assert router.anchors == 1
    # no voter left with a valid ranking: the rule router's order stands
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"*": [{"content": "?"}] * 3}))
    router.voters = [AdaptiveRouter.from_specs(SIBLINGS, ValidationTable(tasks=[]), [], [f"replay:{empty}"]).voters[0]]
    task = TaskView(task_id="u", text="count all songs in my library")
    assert router.rank(task) == RuleRouter(SIBLINGS, table()).rank(task)
    assert router.rank(task) == RuleRouter(SIBLINGS, table()).rank(task)  # held until re-anchoring: no new vote
    assert router.invalid_votes == 1
    router.profilers = []
    router.reanchor(ValidationTable(tasks=table().tasks[:1]))
    assert router.anchors == 2 and router.profiles["pages"].prefer == []


def test_router_json_reproduces_the_final_rankings(tmp_path: Path) -> None:
    """router.json restores each router so that it ranks the training tasks exactly as when saved."""
    from unscaffold.errors import InputError
    from unscaffold.rescue.router_loader import load_router
    from unscaffold.rescue.router_state import save_router
    from unscaffold.rescue.train import ControlRouter

    tasks = [TaskView(task_id=f"t{i}", text=text) for i, text in enumerate(
        ["count all songs in my library", "create a playlist", "delete the groceries note"])]
    rule = RuleRouter(SIBLINGS, ValidationTable(tasks=table().tasks[:2]))
    rule.reanchor(table())  # the final state is the re-anchored table, not the first one
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"*": [vote("guard", "docs", "pages", "base")]}))
    adaptive = AdaptiveRouter.from_specs(SIBLINGS, table(), [], [f"replay:{one}"])
    for router in (RandomRouter(SIBLINGS, seed=7), rule, adaptive, ControlRouter("fixed", SIBLINGS)):
        path = tmp_path / f"{router.name}.json"
        state = save_router(router, path, tasks, seed=7, voters=[f"replay:{one}"])
        restored = load_router(str(path), SIBLINGS, None)
        assert restored.name == router.name
        assert {t.task_id: restored.rank(t) for t in tasks} == state.rankings == {t.task_id: router.rank(t)
                                                                                 for t in tasks}
    assert json.loads((tmp_path / "rule.json").read_text())["anchors"] == 2
    # the adaptive router's votes are not recomputed: an exhausted voter changes nothing for known tasks
    restored = load_router(str(tmp_path / "adaptive.json"), SIBLINGS, None)
    assert restored.rank(tasks[0]) == ["guard", "docs", "pages", "base"]
    with pytest.raises(InputError, match=r"rule\.json: siblings: guard not in the pool being routed over"):
        load_router(str(tmp_path / "rule.json"), ["pages", "docs"], None)


def test_top_k_siblings_each_sampled_k_over_top_k_times() -> None:
    from unscaffold.rescue.routers import default_top_k

    router = RuleRouter(SIBLINGS, table(), neighbours=2)
    task = TaskView(task_id="t", text="count all songs in my library")  # ranked pages, guard, base, docs
    assert pick(router, task, 8, 2) == ["pages", "guard"] * 4
    assert pick(router, task, 4, 4) == ["pages", "guard", "docs", "pages"]  # a pool of 3 for top-4 cycles
    assert [default_top_k(k) for k in (8, 6, 4, 3, 2)] == [4, 3, 4, 3, 2]


def test_ties_with_the_base_harness_are_undecided() -> None:
    tied = ValidationTable(tasks=[ValidationTask(task_id="v", text="create a playlist", rewards={
        "base": [1.0], "pages": [1.0], "docs": [0.0], "guard": [0.0]})])
    task = TaskView(task_id="t", text="create a playlist")
    assert prefers_base(RuleRouter(SIBLINGS, tied, neighbours=1), task) is None
    ahead = ValidationTable(tasks=[tied.tasks[0].model_copy(update={"rewards": {"base": [1.0], "pages": [0.0]}})])
    assert prefers_base(RuleRouter(SIBLINGS, ahead, neighbours=1), task) is True
    assert prefers_base(RuleRouter(SIBLINGS, table(), neighbours=2), TaskView(task_id="u", text="count all songs")) \
        is False
    assert prefers_base(RandomRouter(SIBLINGS, seed=1), task) is None  # a random router says nothing of base


@pytest.mark.parametrize("suite", ["appworld_lite", "retrosynthesis", "spreadsheet"])
def test_two_routers_pick_different_sibling_sets_on_the_shipped_pools(suite: str) -> None:
    """At K = 8 with the default top-k, a rescue group holds 4 of a shipped pool's 6 siblings, so the random
    and the rule router differ on most tasks; with top-k = K (every sibling in every group) they never would."""
    from unscaffold.benchmarks import load_suite
    from unscaffold.rescue.pool import load_pool, shipped_pool
    from unscaffold.rescue.routers import default_top_k

    siblings = load_pool(shipped_pool(suite)).names
    with load_suite(suite) as loaded:
        tasks = [TaskView(task_id=t.id, text=t.instruction) for t in loaded.tasks("train")]
    rows = [ValidationTask(task_id=f"v{i}", text=t.text, rewards={
        "base": [0.0], **{s: [float((i + j) % 3 == 0)] for j, s in enumerate(siblings)}}) for i, t in enumerate(tasks)]
    rule, rand = RuleRouter(siblings, ValidationTable(tasks=rows)), RandomRouter(siblings, seed=42)
    top_k = default_top_k(8)
    sets = [(frozenset(pick(rule, t, 8, top_k)), frozenset(pick(rand, t, 8, top_k))) for t in tasks]
    assert len(siblings) == 6 and all(len(a) == len(b) == 4 for a, b in sets)
    assert sum(a != b for a, b in sets) > len(tasks) / 2
    assert all(set(pick(rule, t, 8)) == set(pick(rand, t, 8)) == set(siblings) for t in tasks)
