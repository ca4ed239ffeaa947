"""Every behaviour detector of the app-world bank and the example Harbor bank fires on a trajectory that
shows its behaviour and stays silent on one that does not (the spreadsheet and retrosynthesis banks have
the same coverage in their own test files)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import EXAMPLES
from unscaffold.behaviors.detector import detect
from unscaffold.knowledge.bank import load_bank
from unscaffold.llm.types import Message
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.suites import find

BANKS = {"appworld": find("appworld_lite").bank,
         "harbor": EXAMPLES / "hstar" / "harbor_bank"}
Action = str | tuple[str, dict[str, Any]]  # a command, or an h* tool call

DOC = "apis.api_docs.show_api_doc(app_name='notes', api_name='show_notes')"
LOGIN = "apis.notes.login(username=u, password=p)"
PAGED = "apis.notes.show_notes(access_token=t, page_index=page)"
FIRST_PAGE = "apis.notes.show_notes(access_token=t)"
CREATE = "apis.music.create_playlist(access_token=t, title='x')"
SHOW = "apis.music.show_playlist(access_token=t, playlist_id=1)"
DOC_FIRST = ([(DOC, LOGIN), (("api_doc", {"app_name": "notes"}),)], [(LOGIN, DOC), (LOGIN,)])
ALL_PAGES = ([(PAGED,), (("fetch_all_pages", {"app_name": "notes", "api_name": "show_notes"}),)],
             [(FIRST_PAGE,), ("apis.notes.show_notes(access_token=t, page_index=0)",)])
READ_BACK = ([(CREATE, SHOW), (f"{CREATE}; print({SHOW})",), (CREATE, ("read_back", {"app_name": "music"}))],
             [(SHOW, CREATE), (CREATE,)])
ANY_DOC = ([(DOC,), (("api_doc", {"app_name": "notes", "api_name": "show_notes"}),)],
           [("apis.api_docs.show_api_descriptions(app_name='notes')", LOGIN)])

# bank -> component -> (action lists that show the behaviour, action lists that do not)
CASES: dict[str, dict[str, tuple[list[tuple[Action, ...]], list[tuple[Action, ...]]]]] = {
    "appworld": {
        "tool:api_doc": DOC_FIRST, "skill:app-workflow": DOC_FIRST,
        "tool:fetch_all_pages": ALL_PAGES, "check:all_pages_read": ALL_PAGES, "memory:first-page-only": ALL_PAGES,
        "tool:read_back": READ_BACK, "check:read_back_writes": READ_BACK,
        "check:doc_after_error": ANY_DOC, "memory:wrong-parameter-names": ANY_DOC,
        "check:complete_before_finish": ([("apis.supervisor.complete_task()",)], [(FIRST_PAGE,), (LOGIN, SHOW)]),
        "skill:target-sets": ([("ids = [c['id'] for c in contacts]",),
                               ("for i in [c for c in contacts if c['relationship'] == 'friend']: pass",)],
                              [("for c in contacts: print(c)",)]),
        "memory:finish-without-answer": ([("apis.supervisor.complete_task(answer=7)",)],
                                         [("apis.supervisor.complete_task()",)]),
    },
    "harbor": {
        "tool:show_file": ([("cat out.txt",), (("show_file", {"path": "out.txt"}),)], [("ls -l",)]),
        "check:show_before_finish": ([("echo 1 > out.txt", "cat out.txt"), ("echo 1 > out.txt && wc -l out.txt",)],
                                     [("cat out.txt", "echo 1 > out.txt"), ("echo 1 > out.txt",)]),
        "memory:tie-order": ([("sort -t, -k2,2nr -k1,1 data.csv",),
                              ("python3 -c 'rows.sort(key=lambda r: (-r[1], r[0]))'",)],
                             [("sort -k2 data.csv",), ("python3 -c 'rows.sort(key=lambda r: r[1])'",)]),
    },
}


def trajectory(actions: tuple[Action, ...]) -> Trajectory:
    messages = [Message(role="user", content="task")]
    for i, action in enumerate(actions):
        name, arguments = ("execute", {"command": action}) if isinstance(action, str) else action
        messages.append(Message(role="assistant", tool_calls=[{"id": str(i), "function": {
            "name": name, "arguments": arguments}}]))
        messages.append(Message(role="tool", tool_call_id=str(i), content="ok\n[exit_code=0]"))
    return Trajectory(trial_id="t", task_id="t", suite="unit", student="s", tools=[], messages=messages)


@pytest.mark.parametrize("bank,component", [(b, c) for b, cases in CASES.items() for c in cases])
def test_detector_shows_and_lacks(bank: str, component: str) -> None:
    spec = load_bank(BANKS[bank]).detectors()[component]
    shows, lacks = CASES[bank][component]
    assert shows and lacks
    assert [detect(spec, trajectory(a)) for a in shows] == [True] * len(shows)
    assert [detect(spec, trajectory(a)) for a in lacks] == [False] * len(lacks)


@pytest.mark.parametrize("bank", sorted(BANKS))
def test_every_detector_has_cases(bank: str) -> None:
    assert sorted(CASES[bank]) == sorted(load_bank(BANKS[bank]).detectors())


def test_a_worked_example_in_the_opening_is_not_a_student_action() -> None:
    spec = load_bank(BANKS["appworld"]).detectors()["tool:api_doc"]
    opening = [*trajectory((DOC, LOGIN)).messages, Message(role="user", content="the real task")]
    student = trajectory((LOGIN,)).messages[1:]
    traj = Trajectory(trial_id="t", task_id="t", suite="unit", student="s", tools=[], messages=opening + student,
                      opening_messages=len(opening))
    assert detect(spec, traj) is False
    assert detect(spec, traj.model_copy(update={"opening_messages": 0})) is True
