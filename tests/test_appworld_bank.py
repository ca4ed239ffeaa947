"""The app-world h* bank and its K: loading, recipes equal to tools, K current and clean, checks, middleware,
and the behaviour detectors on reference, first-page-only and careless trajectories."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import assert_k_current, call, final, needs_bwrap
from unscaffold.behaviors.detector import detect
from unscaffold.benchmarks import load_suite
from unscaffold.knowledge.bank import load_bank
from unscaffold.knowledge.compiler import compile_k, lint_k
from unscaffold.knowledge.kfolder import load_k
from unscaffold.knowledge.middleware import triggered
from unscaffold.llm.types import AssistantResponse, Message, ToolCall, assistant_calls, command_of
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.offline.appworld_lite.apis import STATE_DIR, Apis
from unscaffold.offline.appworld_lite.catalog import catalog
from unscaffold.offline.appworld_lite.server import served
from unscaffold.offline.appworld_lite.template_kit import heredoc
from unscaffold.offline.appworld_lite.world import demo_world
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run
from unscaffold.suites import find

BANK, SHIPPED_K = find("appworld_lite").bank, find("appworld_lite").k
DOC_FIRST, ALL_PAGES, READ_BACK = "tool:api_doc", "tool:fetch_all_pages", "tool:read_back"


def test_bank_loads_with_a_detector_on_every_component() -> None:
    bank = load_bank(BANK)
    assert [t.name for t in bank.manifest.tools] == ["api_doc", "fetch_all_pages", "read_back"]
    assert [(c.name, c.hook) for c in bank.manifest.checks] == [
        ("read_back_writes", "before_command"), ("all_pages_read", "before_command"),
        ("complete_before_finish", "before_finish"), ("doc_after_error", "after_command")]
    assert [m.name for m in bank.memory_rules] == ["wrong-parameter-names", "first-page-only", "finish-without-answer"]
    components = [f"tool:{t.name}" for t in bank.manifest.tools] + [f"check:{c.name}" for c in bank.manifest.checks] \
        + [f"skill:{s.name}" for s in bank.manifest.skills] + [f"memory:{m.name}" for m in bank.manifest.memory]
    assert sorted(bank.detectors()) == sorted(components)
    descriptions = {d.description for d in bank.detectors().values()}
    assert {"read past the first page of a list", "read the world back after the last write",
            "looked up the API doc before the first app call"} <= descriptions


def test_shipped_k_is_current(tmp_path: Path) -> None:
    assert_k_current(BANK, SHIPPED_K, tmp_path)


def test_k_holds_no_task_ids_or_answers() -> None:
    k = load_k(SHIPPED_K)
    assert lint_k(k, load_suite("appworld_lite").leak_markers()) == []
    assert k.component_ids()[:3] == [DOC_FIRST, ALL_PAGES, READ_BACK] and len(k.middleware) == 4


@needs_bwrap
def test_recipes_do_what_the_tools_do(tmp_path: Path) -> None:
    report = compile_k(BANK, tmp_path / "K")
    assert [(c.tool, c.example) for c in report.recipe_checks] == [
        ("api_doc", 0), ("api_doc", 1), ("api_doc", 2), ("fetch_all_pages", 0), ("fetch_all_pages", 1),
        ("read_back", 0), ("read_back", 1)]
    assert all(c.same_output and c.same_files for c in report.recipe_checks)


def test_tool_examples_get_the_demo_world_served_on_the_host(tmp_path: Path) -> None:
    """What compile-k's `example_suite` hook gives each example: the client and a live world, nothing else."""
    assert load_bank(BANK).manifest.example_suite == "appworld_lite"
    arguments = json.dumps({"app_name": "contacts", "api_name": "show_contacts"})
    with load_suite("appworld_lite").example_workspace(tmp_path):
        result = subprocess.run([sys.executable, str(BANK / "tools" / "api_doc.py"), arguments], cwd=tmp_path,
                                capture_output=True, text=True, timeout=60)
    assert result.stdout.startswith("contacts.show_contacts: List contacts") and result.returncode == 0
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == [".apps", ".apps/calls.jsonl",
                                                                                "apis.py"]


# ---------------------------------------------------------------- the runtime checks


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[Path, Apis]]:
    with served(demo_world(), tmp_path):
        yield tmp_path, Apis(tmp_path / STATE_DIR)


def check(workspace: Path, name: str, **context) -> tuple[int, str]:
    result = subprocess.run([sys.executable, str(BANK / "checks" / f"{name}.py"), json.dumps(context)],
                            cwd=workspace, capture_output=True, text=True, timeout=60)
    return result.returncode, result.stdout


def token(apis: Apis, app: str) -> str:
    me = apis.supervisor.show_profile()["email"]
    passwords = {a["account_name"]: a["password"] for a in apis.supervisor.show_account_passwords()}
    return apis[app].login(username=me, password=passwords[app])["access_token"]


SUBMIT = "python3 -c 'from apis import apis; apis.supervisor.complete_task()'"


def test_all_pages_check_blocks_a_first_page_read(demo) -> None:
    ws, apis = demo
    t = token(apis, "contacts")
    assert len(apis.contacts.show_contacts(access_token=t, relationship="friend")) == 5
    assert check(ws, "all_pages_read", command="ls") == (0, "")
    code, out = check(ws, "all_pages_read", command=SUBMIT)
    assert code == 1 and "apis.contacts.show_contacts(relationship='friend'): pages up to page_index=0" in out
    apis.contacts.show_contacts(access_token=t, relationship="friend", page_index=1)
    assert check(ws, "all_pages_read", command=SUBMIT) == (0, "")


def test_read_back_check_wants_each_changed_entity_shown(demo) -> None:
    ws, apis = demo
    music, files = token(apis, "music"), token(apis, "file_system")
    playlist = apis.music.create_playlist(access_token=music, title="New")["playlist_id"]
    apis.file_system.create_file(access_token=files, file_path="~/inbox/a.txt", content="a")
    apis.file_system.show_file(access_token=files, file_path="~/inbox/a.txt")
    apis.file_system.move_file(access_token=files, source_file_path="~/inbox/a.txt",
                               destination_file_path="~/keep/a.txt")
    code, out = check(ws, "read_back_writes", command=SUBMIT)
    assert code == 1 and "apis.music.create_playlist(title='New') was never read back" in out
    assert "apis.file_system.move_file(destination_file_path='~/keep/a.txt'" in out
    assert "create_file" not in out  # read back before the move
    apis.music.show_playlist(access_token=music, playlist_id=playlist)
    apis.file_system.show_file(access_token=files, file_path="~/keep/a.txt")
    assert check(ws, "read_back_writes", command=SUBMIT) == (0, "")
    notes = token(apis, "notes")
    note_id = apis.notes.show_notes(access_token=notes)[0]["note_id"]
    apis.notes.delete_note(access_token=notes, note_id=note_id)
    assert check(ws, "read_back_writes", command=SUBMIT)[0] == 1  # a delete wants the note read before it


def test_finish_and_error_checks(demo) -> None:
    ws, apis = demo
    code, out = check(ws, "complete_before_finish", hook="before_finish", final_answer="7")
    assert code == 1 and out.startswith("The task is not submitted yet")
    apis.supervisor.complete_task(answer=7)
    assert check(ws, "complete_before_finish", hook="before_finish", final_answer="7") == (0, "")
    failed = 'ApiError: Response status code is 422:\n{"message": "Unexpected parameter(s) email"}'
    assert check(ws, "doc_after_error", command="x", output=failed, exit_code=1)[0] == 1
    assert check(ws, "doc_after_error", command="x", output="ok", exit_code=0) == (0, "")


# ---------------------------------------------------------------- review middleware (K's form of the checks)


def transcript(commands: list[str], last_output: str = "ok\n[exit_code=0]") -> list[Message]:
    messages = [Message(role="user", content="task")]
    for i, command in enumerate(commands):
        messages.append(Message(role="assistant", tool_calls=[{"id": str(i), "function": {
            "name": "execute", "arguments": {"command": command}}}]))
        messages.append(Message(role="tool", tool_call_id=str(i), content=last_output))
    return messages


def proposal(command: str | None) -> AssistantResponse:
    if command is None:
        return AssistantResponse(content="The answer is 7.")
    return AssistantResponse(tool_calls=[ToolCall(id="p", name="execute", arguments={"command": command})])


def fired(commands: list[str], command: str | None, last_output: str = "ok\n[exit_code=0]") -> list[str]:
    k = load_k(SHIPPED_K)
    return [h.component_id for h in triggered(k.middleware, transcript(commands, last_output), proposal(command))]


def test_middleware_fires_on_the_visible_transcript() -> None:
    first_page = "python3 -c 'from apis import apis; print(apis.notes.show_notes(access_token=t))'"
    paged = "python3 -c 'for p in range(9): print(apis.notes.show_notes(access_token=t, page_index=p))'"
    shown = "python3 -c 'print(apis.notes.show_note(access_token=t, note_id=3))'"
    assert fired([first_page], SUBMIT) == ["check:read_back_writes", "check:all_pages_read"]
    assert fired([paged, shown], SUBMIT) == []
    assert fired([paged, shown], None) == ["check:complete_before_finish"]
    assert fired([paged, shown, SUBMIT], None) == []
    error = 'Response status code is 422:\n{"message": "Unexpected parameter(s) limit"}\n[exit_code=1]'
    assert fired([paged], "python3 -c 'retry'", error) == ["check:doc_after_error"]
    assert fired([paged], "python3 -c 'apis.api_docs.show_api_doc(app_name=\"notes\", api_name=\"x\")'",
                 error) == []


# ---------------------------------------------------------------- behaviour detectors


def trajectory(commands: list[str], tools: list[tuple[str, dict]] = ()) -> Trajectory:
    messages = transcript(commands)
    for i, (name, args) in enumerate(tools):
        messages.append(Message(role="assistant", tool_calls=[{"id": f"t{i}", "function": {
            "name": name, "arguments": args}}]))
    return Trajectory(trial_id="t", task_id="t", suite="appworld_lite", student="s", tools=[], messages=messages)


def detected(traj: Trajectory) -> set[str]:
    return {cid for cid, spec in load_bank(BANK).detectors().items() if detect(spec, traj)}


def test_detectors_on_reference_and_first_page_solutions() -> None:
    task = catalog()["settle_requests-0_3"]
    reference = detected(trajectory(task.commands()))
    assert reference == set(load_bank(BANK).detectors()) - {"memory:finish-without-answer"}  # no question asked
    first_page = detected(trajectory(task.commands("first")))
    assert first_page == reference - {ALL_PAGES, "check:all_pages_read", "memory:first-page-only"}
    question = detected(trajectory(catalog()["note_fact-2_1"].commands()))
    assert "memory:finish-without-answer" in question and "memory:wrong-parameter-names" in question


@pytest.mark.parametrize("commands,tools,component,expected", [
    # doc look-up before the first app call, not after
    (["apis.api_docs.show_api_doc(app_name='notes', api_name='show_notes')", "apis.notes.login(username=u)"], [],
     DOC_FIRST, True),
    (["apis.notes.login(username=u)", "apis.api_docs.show_api_doc(app_name='notes', api_name='show_notes')"], [],
     DOC_FIRST, False),
    ([], [("api_doc", {"app_name": "notes"})], DOC_FIRST, True),
    # read all pages: a loop over page_index, a literal later page, or the tool
    (["apis.notes.show_notes(access_token=t, page_index=page)"], [], ALL_PAGES, True),
    (["apis.notes.show_notes(access_token=t, page_index=1)"], [], ALL_PAGES, True),
    (["apis.notes.show_notes(access_token=t, page_index=0)", "apis.notes.show_notes(access_token=t)"], [],
     ALL_PAGES, False),
    ([], [("fetch_all_pages", {"app_name": "notes", "api_name": "show_notes"})], ALL_PAGES, True),
    # read back after the last write (in the same command or a later one)
    (["apis.music.create_playlist(access_token=t, title='x'); print(apis.music.show_playlist(access_token=t, "
      "playlist_id=1))"], [], READ_BACK, True),
    (["apis.music.show_playlist(access_token=t, playlist_id=1)", "apis.music.create_playlist(access_token=t, "
      "title='x')"], [], READ_BACK, False),
    (["apis.music.create_playlist(access_token=t, title='x')"], [("read_back", {"app_name": "music"})],
     READ_BACK, True),
    (["apis.supervisor.complete_task()"], [], "memory:finish-without-answer", False),
    (["apis.supervisor.complete_task(answer=7)"], [], "memory:finish-without-answer", True),
])
def test_detector_cases(commands: list[str], tools: list, component: str, expected: bool) -> None:
    spec = load_bank(BANK).detectors()[component]
    assert detect(spec, trajectory(commands, tools)) is expected


# ---------------------------------------------------------------- a student under h*


@needs_bwrap
def test_student_under_hstar_is_stopped_at_a_first_page_submit(tmp_path: Path, write_replay) -> None:
    task = catalog()["note_fact-2_1"]
    assert task.instance.needs_all_pages
    answer = task.instance.outcome.answer
    first_page = heredoc(f"from apis import apis\ntoken = apis.notes.login(username={task.world.supervisor.email!r}, "
                         f"password={task.world.passwords['notes']!r})['access_token']\n"
                         "print(apis.notes.show_notes(access_token=token))")
    submit = heredoc(f"from apis import apis\napis.supervisor.complete_task(answer={answer!r})")
    replay = write_replay({task.id: [
        call(first_page), call(submit),
        {"tool_call": {"name": "fetch_all_pages", "arguments": {"app_name": "notes", "api_name": "show_notes"}}},
        call(submit), final(f"The answer is {answer}."),
    ]})
    summary = run(RunConfig(suite="appworld_lite", student=replay, harness="hstar", task_ids=[task.id], out=tmp_path))
    traj = json.loads((tmp_path / "trials" / task.id / "trajectory.json").read_text())
    results = [m["content"] for m in traj["messages"] if m["role"] == "tool"]
    assert results[1].startswith("[check all_pages_read] Some lists were not read to the end")
    assert results[1].endswith("[the command was not run]\n[exit_code=126]")
    assert "[14 items from 3 full or partial pages; page_index=3 came back empty]" in results[2]
    assert results[3] == "\n[exit_code=0]"
    assert summary.per_task == {task.id: 1.0}


def test_middleware_hints_fire_under_the_official_opening_when_the_student_omits_the_step() -> None:
    """The opening's worked example pages to an empty page and calls complete_task: those calls are the suite's,
    not the student's, so a student that never pages or submits still gets both hints."""
    from unscaffold.offline.appworld_lite.opening import LITE_DEMO, build_opening

    opening = [Message(role="system", content="system"),
               *build_opening(LITE_DEMO, "How many notes?", {"first_name": "A", "last_name": "B", "email": "a@b.c",
                                                             "phone_number": "1"}, [{"name": "notes"}])]
    demo = " ".join(c for call in assistant_calls(opening) if (c := command_of(call)))
    assert "page_index=" in demo and "complete_task(" in demo
    own = transcript(["python3 -c 'from apis import apis; print(apis.notes.show_notes(access_token=t))'"])[1:]
    k = load_k(SHIPPED_K)
    fire = [h.component_id for h in triggered(k.middleware, opening + own, proposal(SUBMIT), len(opening))]
    assert fire == ["check:read_back_writes", "check:all_pages_read"]
    assert [h.component_id for h in triggered(k.middleware, opening + own, proposal(None), len(opening))] == [
        "check:complete_before_finish"]
    # counting the worked example as the student's (the opening not skipped) silences them: the old behaviour
    assert [h.component_id for h in triggered(k.middleware, opening + own, proposal(SUBMIT))] == [
        "check:read_back_writes"]
    assert triggered(k.middleware, opening + own, proposal(None)) == []


def test_the_review_hook_skips_the_opening_it_is_told_of(tmp_path: Path) -> None:
    """The trial passes the hook the trajectory's opening length: the hints the worked example would silence
    reach the reviewer's log."""
    from unscaffold.offline.appworld_lite.opening import LITE_DEMO, build_opening
    from unscaffold.reviewer import ReviewHook, load_reviewer

    opening = [Message(role="system", content="system"),
               *build_opening(LITE_DEMO, "How many notes?", {"first_name": "A", "last_name": "B", "email": "a@b.c",
                                                             "phone_number": "1"}, [{"name": "notes"}])]
    own = transcript(["python3 -c 'from apis import apis; print(apis.notes.show_notes(access_token=t))'"])[1:]
    hook = ReviewHook(load_reviewer("passthrough").for_trial("t"), load_k(SHIPPED_K), 5, tmp_path / "reviews.jsonl",
                      "t-0", "t", opening=lambda: len(opening))
    hook(opening + own, proposal(None))
    [line] = [json.loads(x) for x in (tmp_path / "reviews.jsonl").read_text().splitlines()]
    assert [h["component_id"] for h in line["hints"]] == ["check:complete_before_finish"]
