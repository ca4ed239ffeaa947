"""appworld_lite: the world's APIs, the catalog, the state-based verifier, TGC/SGC and end-to-end runs."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import types
from pathlib import Path
from unittest import mock

import pytest

from tests.conftest import call, final, needs_bwrap
from unscaffold.benchmarks import Task, load_suite
from unscaffold.benchmarks.appworld_lite import apps
from unscaffold.benchmarks.appworld_lite.apis import DB_FILE, STATE_DIR, ApiError, Apis, api_kind
from unscaffold.benchmarks.appworld_lite.catalog import LiteTask, build_task, catalog
from unscaffold.benchmarks.appworld_lite.metrics import goal_completion
from unscaffold.benchmarks.appworld_lite.suite import AppWorldLiteSuite
from unscaffold.benchmarks.appworld_lite.templates import TEMPLATES
from unscaffold.benchmarks.appworld_lite.verify import answers_match, verify
from unscaffold.benchmarks.appworld_lite.world import demo_world, setup_workspace
from unscaffold.collect.models import RunConfig
from unscaffold.collect.runner import run
from unscaffold.errors import InputError

# Two scenarios whose tasks mix one-page and several-page lists, for the fast end-to-end runs.
SAMPLE_SCENARIOS = ("settle_requests-0", "note_fact-2", "unread_from-0")


def sample_ids() -> list[str]:
    return [t.id for t in catalog().values() if t.scenario in SAMPLE_SCENARIOS]


# ---------------------------------------------------------------- the world and its APIs


@pytest.fixture
def world(tmp_path: Path) -> Apis:
    """The demo world (no task's) in a fresh workspace."""
    setup_workspace(tmp_path, demo_world())
    return Apis(tmp_path / STATE_DIR)


def login(apis: Apis, app: str) -> str:
    me = apis.supervisor.show_profile()["email"]
    password = {a["account_name"]: a["password"] for a in apis.supervisor.show_account_passwords()}[app]
    return apis[app].login(username=me, password=password)["access_token"]


def test_login_is_per_app_and_tokens_are_explicit(world: Apis) -> None:
    me = world.supervisor.show_profile()["email"]
    with pytest.raises(ApiError, match="(?s)401.*Invalid username or password"):
        world.contacts.login(username=me, password="wrong")
    music = login(world, "music")
    with pytest.raises(ApiError, match="(?s)401.*not authorized to use contacts APIs"):
        world.contacts.show_contacts(access_token=music)
    with pytest.raises(ApiError, match="(?s)422.*Missing required parameter.*access_token"):
        world.contacts.show_contacts()
    assert world.contacts.show_contacts(access_token=login(world, "contacts"))


def test_pagination_reads_one_page_at_a_time_until_empty(world: Apis) -> None:
    token = login(world, "contacts")
    everyone = world.contacts.show_contacts(access_token=token, page_limit=20)
    assert len(everyone) > 5
    pages, page = [], 0
    while batch := world.contacts.show_contacts(access_token=token, page_index=page):
        assert len(batch) <= apps.DEFAULT_PAGE_LIMIT
        pages.append(batch)
        page += 1
    assert [c for p in pages for c in p] == everyone
    assert len(pages[0]) == apps.DEFAULT_PAGE_LIMIT  # a one-page read misses data
    assert world.contacts.show_contacts(access_token=token, page_index=99) == []
    for bad, message in (({"page_limit": 0}, "page_limit must be between 1 and 20"),
                         ({"page_limit": 21}, "page_limit must be between 1 and 20"),
                         ({"page_index": -1}, "page_index must be 0 or more"),
                         ({"page_index": "two"}, "must be of type integer, not str")):
        with pytest.raises(ApiError, match=message):
            world.contacts.show_contacts(access_token=token, **bad)
    assert world.contacts.show_contacts(access_token=token, page_index="1") == pages[1]  # as a web API would


def test_api_errors_name_the_real_parameters(world: Apis) -> None:
    token = login(world, "messages")
    with pytest.raises(ApiError) as err:
        world.messages.send_message(access_token=token, email="a@b.c", text="hi")
    assert str(err.value) == (
        'Response status code is 422:\n{"message": "Unexpected parameter(s) email, text for messages.send_message; '
        "its parameters are: access_token, receiver_email, message. See apis.api_docs.show_api_doc("
        "app_name='messages', api_name='send_message').\"}")
    with pytest.raises(ApiError, match="(?s)404.*No API named 'send_text'"):
        world.messages.send_text(access_token=token)
    with pytest.raises(ApiError, match="(?s)404.*No app named 'phone'"):
        world.phone.login(username="x", password="y")
    with pytest.raises(ApiError, match="takes its arguments by name"):
        world.messages.show_message(token, 1)
    with pytest.raises(ApiError, match="(?s)404.*No message found"):
        world.messages.show_message(access_token=token, message_id=999)
    doc = world.api_docs.show_api_doc(app_name="messages", api_name="send_message")
    assert [p["name"] for p in doc["parameters"]] == ["access_token", "receiver_email", "message"]
    assert {a["name"] for a in world.api_docs.show_app_descriptions()} >= {
        "contacts", "messages", "payments", "music", "notes", "file_system", "supervisor", "api_docs"}


def test_complete_task_submits_once_and_calls_are_logged(world: Apis) -> None:
    assert world.supervisor.complete_task(answer=3) == {"message": "The task is marked complete."}
    with pytest.raises(ApiError, match="(?s)409.*already completed"):
        world.supervisor.complete_task()
    log = [json.loads(x) for x in (world.state_dir / "calls.jsonl").read_text().splitlines()]
    assert [(e["api"], e["kind"], e["ok"]) for e in log] == [("complete_task", "submit", True),
                                                             ("complete_task", "submit", False)]


def test_failed_write_changes_nothing(world: Apis) -> None:
    token = login(world, "payments")
    balance = world.payments.show_balance(access_token=token)["balance"]
    with pytest.raises(ApiError, match="balance is too low"):
        world.payments.send_money(access_token=token, receiver_email="x@y.z", amount=balance + 1)
    assert world.payments.show_balance(access_token=token)["balance"] == balance
    assert world.payments.show_transactions(access_token=token, user_email="x@y.z") == []


def test_api_kinds_match_what_the_apps_declare() -> None:
    for app, table in apps.APPS.items():
        for name, spec in table.items():
            kind = api_kind(app, name)
            assert kind in ("read", "login", "submit", "write")
            assert (kind == "read") == (app == "api_docs" or name.startswith(("show_", "search_"))), (app, name)
            assert spec.paged <= (kind == "read")


# ---------------------------------------------------------------- catalog


def test_catalog_has_39_scenarios_of_3_split_by_scenario() -> None:
    tasks = list(catalog().values())
    assert len(tasks) == 117 and len({t.scenario for t in tasks}) == 39
    assert {t.template.name for t in tasks} == {t.name for t in TEMPLATES}
    by_split = {s: {t.scenario for t in tasks if t.split == s} for s in ("train", "test")}
    assert len(by_split["train"]) == 26 and len(by_split["test"]) == 13 and not by_split["train"] & by_split["test"]
    apps_used = {app for t in tasks for app, _ in t.template.doc_apis}
    assert len(apps_used) >= 5
    needs = [t for t in tasks if t.instance.needs_all_pages]
    assert 0 < len(needs) < len(tasks)
    questions = sum(t.instance.outcome.answer is not None for t in tasks)
    assert 0 < questions < len(tasks)  # both question tasks and action-only tasks


def test_catalog_is_deterministic() -> None:
    for task_id, scenario, variant in (("artist_playlist-1_2", 1, 2), ("prune_notes-2_3", 2, 3)):
        a, b = catalog()[task_id], build_task(catalog()[task_id].template, scenario, variant)
        assert (a.instruction, a.instance.outcome, a.world.rows) == (b.instruction, b.instance.outcome, b.world.rows)


def test_suite_tasks_and_leak_markers() -> None:
    suite = load_suite("appworld_lite")
    assert isinstance(suite, AppWorldLiteSuite)
    assert [len(suite.tasks(s)) for s in suite.splits()] == [78, 39]
    task = suite.tasks("test")[0]
    assert task.scenario == task.id.rsplit("_", 1)[0] and "from apis import apis" in task.instruction
    markers = suite.leak_markers()
    assert task.id in markers and "settle_requests-0" in markers
    assert str(catalog()["note_fact-0_1"].instance.outcome.answer) in markers
    with pytest.raises(InputError, match="splits train, test"):
        suite.tasks("dev")
    with pytest.raises(InputError, match="takes no --data"):
        load_suite("appworld_lite", Path("/tmp"))


# ---------------------------------------------------------------- reference solutions, in process


def solve_in_process(task: LiteTask, root: Path, paging: str) -> float:
    """Run the reference scripts against a fresh world without a sandbox; return the verifier's reward."""
    workspace = root / task.id / paging
    setup_workspace(workspace, task.world)
    task.world.write(workspace.parent / f"{paging}-initial.db")
    module = types.ModuleType("apis")
    module.apis = Apis(workspace / STATE_DIR)  # type: ignore[attr-defined]
    with mock.patch.dict(sys.modules, {"apis": module}), contextlib.redirect_stdout(io.StringIO()):
        for script in task.template.scripts(task.instance.params, paging):
            with contextlib.suppress(Exception):  # a first-page-only script may not find its target
                exec(compile(script, task.id, "exec"), {"__name__": "__main__"})
    score = verify(workspace.parent / f"{paging}-initial.db", workspace / STATE_DIR / DB_FILE, task.instance.outcome)
    return score.reward


def test_every_reference_solution_passes_and_first_page_fails_exactly_the_paginated(tmp_path: Path) -> None:
    tasks = list(catalog().values())
    assert all(solve_in_process(t, tmp_path, "all") == 1.0 for t in tasks)
    failing = {t.id for t in tasks if solve_in_process(t, tmp_path, "first") < 1.0}
    assert failing == {t.id for t in tasks if t.instance.needs_all_pages}


# ---------------------------------------------------------------- verifier


@pytest.fixture
def solved(tmp_path: Path) -> tuple[LiteTask, Path, Apis]:
    """settle_requests-0_1 solved by its reference script in process: (task, initial db, apis on the result)."""
    task = catalog()["settle_requests-0_1"]
    assert solve_in_process(task, tmp_path, "all") == 1.0
    workspace = tmp_path / task.id / "all"
    return task, tmp_path / task.id / "all-initial.db", Apis(workspace / STATE_DIR)


def rescore(task: LiteTask, initial: Path, apis: Apis) -> tuple[float, dict]:
    score = verify(initial, apis.state_dir / DB_FILE, task.instance.outcome)
    return score.reward, score.details


def test_verifier_catches_an_extra_change(solved) -> None:
    task, initial, apis = solved
    token = login(apis, "messages")
    apis.messages.send_message(access_token=token, receiver_email="someone@example.com", message="extra")
    reward, details = rescore(task, initial, apis)
    assert reward == 0.0 and details["checks"]["no_other_changes"] is False
    assert details["checks"]["expected_changes_made"] is True
    assert details["unexpected_changes"] == [
        'messages added {"is_read": 1, "receiver_email": "someone@example.com", "sender_email": "'
        + task.world.supervisor.email + '", "sent_at": "2024-06-15T12:00:00", "text": "extra"}']


def test_verifier_catches_a_missing_and_a_wrong_change(tmp_path: Path) -> None:
    task = catalog()["update_phone-0_1"]
    setup_workspace(tmp_path / "ws", task.world)
    task.world.write(tmp_path / "initial.db")
    apis = Apis(tmp_path / "ws" / STATE_DIR)
    token = login(apis, "contacts")
    contact_id = dict(task.instance.outcome.effects[0].args)["contact_id"]
    apis.contacts.update_contact(access_token=token, contact_id=contact_id, phone_number="555-0000")
    apis.supervisor.complete_task()
    reward, details = rescore(task, tmp_path / "initial.db", apis)
    assert reward == 0.0
    phone = task.instance.params["phone"]
    assert details["missing_changes"] == [f'contacts #{contact_id} set {{"phone_number": "{phone}"}}']
    assert details["unexpected_changes"] == [f'contacts #{contact_id} set {{"phone_number": "555-0000"}}']


def test_verifier_needs_complete_task_and_the_right_answer(tmp_path: Path) -> None:
    task = catalog()["note_fact-0_1"]
    setup_workspace(tmp_path / "ws", task.world)
    task.world.write(tmp_path / "initial.db")
    apis = Apis(tmp_path / "ws" / STATE_DIR)
    reward, details = rescore(task, tmp_path / "initial.db", apis)
    assert reward == 0.0 and details["checks"]["task_completed"] is False
    apis.supervisor.complete_task(answer="not it")
    reward, details = rescore(task, tmp_path / "initial.db", apis)
    assert reward == 0.0 and details["checks"] == {"task_completed": True, "answer_matches": False,
                                                   "expected_changes_made": True, "no_other_changes": True}
    missing = verify(tmp_path / "initial.db", tmp_path / "nope.db", task.instance.outcome)
    assert (missing.reward, missing.reason) == (0.0, "the world database is missing (nope.db)")
    (tmp_path / "garbage.db").write_text("not a database")
    garbage = verify(tmp_path / "initial.db", tmp_path / "garbage.db", task.instance.outcome)
    assert garbage.reward == 0.0 and garbage.reason.startswith("the world database is unreadable")


@pytest.mark.parametrize("expected,given,ok", [
    (7, 7, True), (7, "7", True), (12.5, "$12.50", True), (12.5, 12.51, False), ("amber-cobalt-12", "Amber-Cobalt-12 ",
                                                                                 True),
    ("B-123", "B-124", False), (None, None, True), (None, "", True), (None, "done", False), (3, "three", False),
])
def test_answer_comparison(expected, given, ok) -> None:
    assert answers_match(expected, given) is ok


def test_goal_completion_is_tgc_and_all_or_nothing_sgc() -> None:
    tasks = [Task(id=f"s{s}_{i}", instruction="x", scenario=f"s{s}") for s in range(3) for i in range(1, 4)]
    rewards = {t.id: 1.0 for t in tasks} | {"s1_2": 0.0, "s2_1": 0.0, "s2_3": 0.0}
    assert goal_completion(tasks, rewards) == {"tgc": 66.6667, "sgc": 33.3333, "n_scenarios": 3,
                                               "n_scenarios_passed": 1}
    assert goal_completion(tasks, {})["tgc"] == 0.0


# ---------------------------------------------------------------- end to end, in the sandbox


def first_page_replay(task_ids: list[str]) -> dict[str, list[dict]]:
    return {tid: [call(c) for c in catalog()[tid].commands("first")] + [final("done")] for tid in task_ids}


@needs_bwrap
def test_oracle_run_scores_100_tgc_and_sgc(tmp_path: Path) -> None:
    summary = run(RunConfig(suite="appworld_lite", student="oracle", task_ids=sample_ids(), out=tmp_path,
                            concurrency=2))
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["tgc"] == results["sgc"] == results["pass_at_1"] == 100.0
    assert results["n_scenarios"] == 3 and summary.n_tasks == 9
    workspace = tmp_path / "trials" / "settle_requests-0_1" / "workspace"
    assert sorted(p.name for p in (workspace / STATE_DIR).iterdir()) == ["apps.py", "calls.jsonl", "task.json",
                                                                         "world.db"]
    assert "outcome" not in (workspace / STATE_DIR / "task.json").read_text()  # the gold stays outside
    assert (tmp_path / "trials" / "settle_requests-0_1" / "gold" / "initial.db").is_file()


@needs_bwrap
def test_first_page_replay_fails_exactly_the_tasks_that_need_more_pages(tmp_path: Path, write_replay) -> None:
    ids = sample_ids()
    summary = run(RunConfig(suite="appworld_lite", student=write_replay(first_page_replay(ids)), task_ids=ids,
                            out=tmp_path, concurrency=2))
    failed = {tid for tid, reward in summary.per_task.items() if reward < 1.0}
    assert failed == {tid for tid in ids if catalog()[tid].instance.needs_all_pages} == {
        "settle_requests-0_3", "note_fact-2_1", "note_fact-2_2"}
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["tgc"] == results["pass_at_1"] == 66.6667
    assert results["sgc"] == 33.3333  # only unread_from-0 fits on first pages throughout


@pytest.mark.slow
@needs_bwrap
@pytest.mark.parametrize("split", ["train", "test"])
def test_oracle_scores_100_on_every_split(tmp_path: Path, split: str) -> None:
    summary = run(RunConfig(suite="appworld_lite", student="oracle", split=split, out=tmp_path, concurrency=2))
    assert summary.pass_at_1 == 100.0 and summary.tgc == 100.0 and summary.sgc == 100.0  # type: ignore[attr-defined]


@pytest.mark.slow
@needs_bwrap
def test_first_page_replay_on_every_task(tmp_path: Path, write_replay) -> None:
    ids = list(catalog())
    summary = run(RunConfig(suite="appworld_lite", student=write_replay(first_page_replay(ids)), out=tmp_path,
                            concurrency=2))
    failed = {tid for tid, reward in summary.per_task.items() if reward < 1.0}
    assert failed == {tid for tid in ids if catalog()[tid].instance.needs_all_pages}
