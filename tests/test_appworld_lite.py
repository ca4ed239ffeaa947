"""appworld_lite: the world's APIs, the catalog, the state-based verifier, TGC/SGC and end-to-end runs."""

from __future__ import annotations

import contextlib
import io
import json
import re
import socket as socket_lib
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from tests.helpers import call, final, needs_bwrap
from unscaffold.benchmarks import Task, load_suite
from unscaffold.benchmarks.appworld_real import bridge
from unscaffold.errors import InputError
from unscaffold.offline.appworld_lite import apps, server
from unscaffold.offline.appworld_lite.apis import STATE_DIR, ApiError, Apis, api_kind
from unscaffold.offline.appworld_lite.catalog import LiteTask, build_task, catalog
from unscaffold.offline.appworld_lite.metrics import goal_completion
from unscaffold.offline.appworld_lite.server import served
from unscaffold.offline.appworld_lite.suite import AppWorldLiteSuite
from unscaffold.offline.appworld_lite.templates import TEMPLATES
from unscaffold.offline.appworld_lite.verify import answers_match, verify
from unscaffold.offline.appworld_lite.world import demo_world
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run

# Two scenarios whose tasks mix one-page and several-page lists, for the fast end-to-end runs.
SAMPLE_SCENARIOS = ("settle_requests-0", "note_fact-2", "unread_from-0")


def sample_ids() -> list[str]:
    return [t.id for t in catalog().values() if t.scenario in SAMPLE_SCENARIOS]


# ---------------------------------------------------------------- the world and its APIs


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Apis]:
    """The demo world (no task's) served to a fresh workspace."""
    with served(demo_world(), tmp_path):
        yield Apis(tmp_path / STATE_DIR)


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


def test_the_client_is_standard_library_only() -> None:
    """It runs in the sandbox's python3, which cannot import the project."""
    source = (Path(apps.__file__).parent / "apis.py").read_text()
    imports = re.findall(r"^(?:from|import)\s+([\w.]+)", source, re.M)
    assert imports == ["__future__", "ast", "json", "os", "socket", "pathlib", "typing"]


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


@contextlib.contextmanager
def task_world(task: LiteTask, root: Path) -> Iterator[tuple[Apis, Path, Path]]:
    """The task's world served to a fresh workspace: (apis on it, a copy of the initial world, the live world)."""
    task.world.write(root / "initial.db")
    with served(task.world, root / "ws", root / "world") as db:
        yield Apis(root / "ws" / STATE_DIR), root / "initial.db", db


def run_reference(task: LiteTask, apis: Apis, paging: str) -> None:
    """The reference scripts, in this process, as `from apis import apis` sees them in a workspace."""
    module = types.ModuleType("apis")
    module.apis = apis  # type: ignore[attr-defined]
    with mock.patch.dict(sys.modules, {"apis": module}), contextlib.redirect_stdout(io.StringIO()):
        for script in task.template.scripts(task.instance.params, paging):
            with contextlib.suppress(Exception):  # a first-page-only script may not find its target
                exec(compile(script, task.id, "exec"), {"__name__": "__main__"})


def rescore(task: LiteTask, initial: Path, db: Path) -> tuple[float, dict]:
    score = verify(initial, db, task.instance.outcome)
    return score.reward, score.details


def solve_in_process(task: LiteTask, root: Path, paging: str) -> float:
    """Run the reference scripts against a fresh world without a sandbox; return the verifier's reward."""
    with task_world(task, root / task.id / paging) as (apis, initial, db):
        run_reference(task, apis, paging)
    return rescore(task, initial, db)[0]


def test_every_reference_solution_passes_and_first_page_fails_exactly_the_paginated(tmp_path: Path) -> None:
    tasks = list(catalog().values())
    assert all(solve_in_process(t, tmp_path, "all") == 1.0 for t in tasks)
    failing = {t.id for t in tasks if solve_in_process(t, tmp_path, "first") < 1.0}
    assert failing == {t.id for t in tasks if t.instance.needs_all_pages}


# ---------------------------------------------------------------- verifier


@pytest.fixture
def solved(tmp_path: Path) -> Iterator[tuple[LiteTask, Path, Path, Apis]]:
    """settle_requests-0_1 solved by its reference script in process: (task, initial world, live world, apis)."""
    task = catalog()["settle_requests-0_1"]
    with task_world(task, tmp_path) as (apis, initial, db):
        run_reference(task, apis, "all")
        assert rescore(task, initial, db)[0] == 1.0
        yield task, initial, db, apis


def test_verifier_catches_an_extra_change(solved) -> None:
    task, initial, db, apis = solved
    token = login(apis, "messages")
    apis.messages.send_message(access_token=token, receiver_email="someone@example.com", message="extra")
    reward, details = rescore(task, initial, db)
    assert reward == 0.0 and details["checks"]["no_other_changes"] is False
    assert details["checks"]["expected_changes_made"] is True
    assert details["unexpected_changes"] == [
        'messages added {"is_read": 1, "receiver_email": "someone@example.com", "sender_email": "'
        + task.world.supervisor.email + '", "sent_at": "2024-06-15T12:00:00", "text": "extra"}']


def test_verifier_catches_a_missing_and_a_wrong_change(tmp_path: Path) -> None:
    task = catalog()["update_phone-0_1"]
    with task_world(task, tmp_path) as (apis, initial, db):
        token = login(apis, "contacts")
        contact_id = dict(task.instance.outcome.effects[0].args)["contact_id"]
        apis.contacts.update_contact(access_token=token, contact_id=contact_id, phone_number="555-0000")
        apis.supervisor.complete_task()
    reward, details = rescore(task, initial, db)
    assert reward == 0.0
    phone = task.instance.params["phone"]
    assert details["missing_changes"] == [f'contacts #{contact_id} set {{"phone_number": "{phone}"}}']
    assert details["unexpected_changes"] == [f'contacts #{contact_id} set {{"phone_number": "555-0000"}}']
    assert verify(initial, db, task.instance.outcome).reason == (
        f'failed: expected_changes_made, no_other_changes (missing contacts #{contact_id} set {{"phone_number": '
        f'"{phone}"}}; unexpected contacts #{contact_id} set {{"phone_number": "555-0000"}})')


def test_verifier_needs_complete_task_and_the_right_answer(tmp_path: Path) -> None:
    task = catalog()["note_fact-0_1"]
    with task_world(task, tmp_path) as (apis, initial, db):
        reward, details = rescore(task, initial, db)
        assert reward == 0.0 and details["checks"]["task_completed"] is False
        apis.supervisor.complete_task(answer="not it")
    reward, details = rescore(task, initial, db)
    assert reward == 0.0 and details["checks"] == {"task_completed": True, "answer_matches": False,
                                                   "expected_changes_made": True, "no_other_changes": True}
    assert verify(initial, db, task.instance.outcome).reason == "failed: answer_matches (answered 'not it')"
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
                            concurrency=2, sandbox={"keep_workspace": True}))  # the workspace is looked at after
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["tgc"] == results["sgc"] == results["pass_at_1"] == 100.0
    assert results["n_scenarios"] == 3 and summary.n_tasks == 9
    trial = tmp_path / "trials" / "settle_requests-0_1"
    # No world, gold or apps code anywhere in the workspace: the client, the request and the call log only.
    assert sorted(str(p.relative_to(trial / "workspace")) for p in (trial / "workspace").rglob("*")) == [
        ".apps", ".apps/calls.jsonl", ".apps/task.json", "apis.py"]
    assert "outcome" not in (trial / "workspace" / STATE_DIR / "task.json").read_text()  # the gold stays outside
    assert (trial / "gold" / "initial.db").is_file() and (trial / "world" / "world.db").is_file()


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


# ---------------------------------------------------------------- the world stays behind its server


@needs_bwrap
def test_a_student_cannot_edit_the_world_file(tmp_path: Path, write_replay) -> None:
    """The task's change made with sqlite on the world's file, as a hostile student would: it is not there."""
    task = catalog()["update_phone-0_1"]
    contact_id = dict(task.instance.outcome.effects[0].args)["contact_id"]
    trial = tmp_path / "run" / "trials" / task.id
    edit = (f"python3 -c \"import sqlite3; sqlite3.connect('.apps/world.db').execute('UPDATE contacts SET "
            f"phone_number = 1 WHERE contact_id = {contact_id}')\"")
    reach = f"cat {trial / 'world' / 'world.db'} {trial / 'gold' / 'initial.db'}"
    submit = "python3 -c 'from apis import apis; apis.supervisor.complete_task()'"
    replay = write_replay({task.id: [call(edit), call(reach), call(submit), final("done")]})
    summary = run(RunConfig(suite="appworld_lite", student=replay, task_ids=[task.id], out=tmp_path / "run"))
    assert summary.per_task == {task.id: 0.0}
    outputs = [m["content"] for m in json.loads((trial / "trajectory.json").read_text())["messages"]
               if m["role"] == "tool"]
    assert "sqlite3.OperationalError: no such table: contacts" in outputs[0]
    assert f"cat: {trial / 'world' / 'world.db'}: No such file or directory" in outputs[1]
    assert f"cat: {trial / 'gold' / 'initial.db'}: No such file or directory" in outputs[1]
    assert outputs[2] == "\n[exit_code=0]"
    result = json.loads((trial / "result.json").read_text())
    phone = task.instance.params["phone"]
    assert result["details"]["missing_changes"] == [f'contacts #{contact_id} set {{"phone_number": "{phone}"}}']
    assert result["details"]["checks"]["task_completed"] is True


def raw(socket_path: Path, data: bytes) -> dict:
    """One request as bytes, as a student could send it without the client; the server's reply."""
    with socket_lib.socket(socket_lib.AF_UNIX, socket_lib.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(socket_path))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # refused before all of it was read
            sock.sendall(data)
            sock.shutdown(socket_lib.SHUT_WR)
        reply = b""
        while not reply.endswith(b"\n") and (chunk := sock.recv(1 << 16)):
            reply += chunk
    return json.loads(reply)


def test_bad_requests_get_an_error_and_the_server_keeps_serving(world: Apis) -> None:
    sock = world.state_dir / "world.sock"
    bad = "Bad request: "
    assert raw(sock, b"{not json\n") == {"ok": False, "error": bad + "not JSON (JSONDecodeError)."}
    assert raw(sock, b"[" * 100_000 + b"\n") == {"ok": False, "error": bad + "not JSON (RecursionError)."}
    assert raw(sock, b"x" * (3 << 20) + b"\n") == {"ok": False,
                                                    "error": bad + "the request is longer than 1048576 bytes."}
    assert raw(sock, b"[1, 2]\n") == {"ok": False, "error": bad + "expected one JSON object on one line."}
    assert raw(sock, b"\xff\xfe\n") == {"ok": False, "error": bad + "not JSON (UnicodeDecodeError)."}
    assert raw(sock, b"") == {"ok": False, "error": bad + "expected one JSON object on one line."}
    assert raw(sock, b'{"op": "evaluate"}\n') == {"ok": False, "error": 'Response status code is 400:\n{"message": '
                                                  '"Unknown op \'evaluate\': this world answers API calls only."}'}
    assert raw(sock, b'{"op": "call", "app": 3, "api": [], "arguments": "x"}\n')["error"].startswith(
        "Response status code is 400:")
    reply = raw(sock, json.dumps({"op": "call", "app": "notes", "api": "show_notes",
                                  "arguments": {"access_token": {"a": [1] * 10}}}).encode() + b"\n")
    assert reply == {"ok": False, "error": 'Response status code is 422:\n{"message": "Parameter \'access_token\' of '
                     'notes.show_notes must be of type string, not dict."}'}
    token = login(world, "contacts")
    with pytest.raises(ApiError) as err:  # sqlite cannot hold the id: an internal error, not a dead server
        world.contacts.show_contact(access_token=token, contact_id=10**30)
    assert str(err.value) == ('Response status code is 500:\n{"message": "OverflowError: Python int too large to '
                              'convert to SQLite INTEGER"}')
    assert world.supervisor.show_profile()["email"] == demo_world().supervisor.email  # still serving
    log = [json.loads(x) for x in (world.state_dir / "calls.jsonl").read_text().splitlines()]
    assert [(e["api"], e["ok"]) for e in log][-2:] == [("show_contact", False), ("show_profile", True)]


def test_stopping_ends_a_request_left_half_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reading = threading.Event()
    read_request = bridge.read_request

    def observed(*args: object) -> dict:
        reading.set()
        return read_request(*args)

    monkeypatch.setattr(bridge, "read_request", observed)
    with socket_lib.socket(socket_lib.AF_UNIX, socket_lib.SOCK_STREAM) as sock:
        with served(demo_world(), tmp_path):
            sock.connect(str(tmp_path / STATE_DIR / "world.sock"))
            sock.sendall(b'{"op": "call", "app": "supervisor", ')  # and never the rest
            assert reading.wait(30)
        assert json.loads(sock.recv(1 << 16)) == {"ok": False, "error": "Bad request: the server is stopping."}
    assert sorted(p.name for p in (tmp_path / STATE_DIR).iterdir()) == []


def test_writes_past_the_world_size_limit_fail_with_507(world: Apis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "MAX_WORLD_BYTES", 1 << 20)
    token = login(world, "notes")
    with pytest.raises(ApiError, match="(?s)507.*database or disk is full"):
        for i in range(4):
            world.notes.create_note(access_token=token, title=f"big {i}", content="x" * 400_000, tags=[])
    assert len(world.notes.show_notes(access_token=token, query="big", page_limit=20)) == 2  # rolled back


@pytest.mark.filterwarnings("ignore:--sandbox none")
def test_the_server_is_gone_after_the_trial_even_after_a_crash(tmp_path: Path, write_replay,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    task = catalog()["note_fact-0_1"]
    profile = "python3 -c 'from apis import apis; print(apis.supervisor.show_profile()[\"email\"])'"
    replay = write_replay({task.id: [call(profile), final("done")]})
    config = RunConfig(suite="appworld_lite", student=replay, task_ids=[task.id], sandbox="none",
                       out=tmp_path / "ok")
    assert run(config).per_task == {task.id: 0.0}
    seen = json.loads((tmp_path / "ok" / "trials" / task.id / "trajectory.json").read_text())["messages"]
    assert task.world.supervisor.email in [m["content"] for m in seen if m["role"] == "tool"][0]

    def crash(*args: object) -> None:
        raise RuntimeError("scorer crashed")

    monkeypatch.setattr(AppWorldLiteSuite, "score", crash)
    assert run(config.model_copy(update={"out": tmp_path / "crashed"})).per_task == {task.id: 0.0}
    result = json.loads((tmp_path / "crashed" / "trials" / task.id / "result.json").read_text())
    assert (result["reason"], result["exception"]) == ("the verifier crashed: RuntimeError: scorer crashed",
                                                       "RuntimeError: scorer crashed")
    assert result["outcome"] == "verifier_error"
    for out in ("ok", "crashed"):
        state = tmp_path / out / "trials" / task.id / "workspace" / STATE_DIR
        assert sorted(p.name for p in state.iterdir()) == ["calls.jsonl", "task.json"]  # the socket is gone
    assert [t.name for t in threading.enumerate() if t.name.startswith("world server")] == []


@needs_bwrap
def test_the_demonstration_opening_has_the_official_structure_with_its_own_example(tmp_path: Path) -> None:
    task_id = sample_ids()[0]
    summary = run(RunConfig(suite="appworld_lite", student="oracle", task_ids=[task_id], opening="demonstration",
                            out=tmp_path / "demo"))
    assert summary.per_task == {task_id: 1.0}
    messages = json.loads((tmp_path / "demo" / "trials" / task_id / "trajectory.json").read_text())["messages"]
    assert [m["role"] for m in messages[:24]] == ["system", "user", *["assistant", "tool"] * 10, "user", "user"]
    assert "How many notes do I have in my notes app?" in messages[1]["content"]
    calls = [m["tool_calls"][0]["function"]["arguments"]["command"] for m in messages[:24] if m["role"] == "assistant"]
    assert "apis.notes.show_notes(access_token=token, page_index=page)" in calls[7]
    lt = catalog()[task_id]
    supervisor = lt.world.supervisor_dict()
    assert messages[23]["content"].endswith(f"My name is {supervisor['first_name']} {supervisor['last_name']}. My "
                                            f"email is {supervisor['email']} and my phone number is "
                                            f"{supervisor['phone_number']}.\n\nTask: "
                                            f"{lt.template.task(lt.instance.params)}")
    plain = run(RunConfig(suite="appworld_lite", student="oracle", task_ids=[task_id], out=tmp_path / "plain"))
    first = json.loads((tmp_path / "plain" / "trials" / task_id / "trajectory.json").read_text())["messages"]
    assert [m["role"] for m in first[:2]] == ["system", "user"] and first[1]["content"] == lt.instruction
    assert plain.per_task == {task_id: 1.0}
    with pytest.raises(InputError, match="^--opening: suite 'spreadsheet' starts episodes as plain, not "
                                         "'demonstration'$"):
        run(RunConfig(suite="spreadsheet", student="oracle", split="test", opening="demonstration",
                      out=tmp_path / "sheet"))
