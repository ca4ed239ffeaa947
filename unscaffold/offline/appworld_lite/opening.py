"""The official AppWorld first turn, in our interface: a worked demonstration before the real task.

The pinned Harness-Zero AppWorld agent opens every episode with 23 messages after the system prompt
(24 in all): an introduction with a fictional user's identity and the real app descriptions, a worked
example of ten tool calls with their outputs (find the apps, read the docs, get the password, log in,
page through a list until an empty page, submit with complete_task), the rules, then the real task with
the real supervisor's identity behind a current-task marker. A plain two-message start is off the
distribution the scores were measured on. This module builds the same structure for our `execute` tool
and the `apis` client (each command a fresh process, so the demonstration passes tokens by value), with
its own text and mocked outputs: one demonstration for the real AppWorld apps, one for appworld_lite's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from unscaffold.llm.types import ChatToolCall, FunctionCall, Message

CURRENT_TASK_MARKER = "[CURRENT TASK]"
DEMO_USER = {"first_name": "Demo", "last_name": "User", "email": "demo.user@example.invalid",
             "phone_number": "5550001001"}
Opening = Literal["plain", "demonstration"]


class DemoStep(BaseModel):
    thought: str
    code: str
    output: str


class Demonstration(BaseModel):
    """One worked example: the task it solves and its ten steps."""

    task: str
    steps: list[DemoStep]


def _py(code: str) -> str:
    """The command that runs Python against the apps: a fresh interpreter each time."""
    return "python3 - <<'PY'\nfrom apis import apis\n" + code.strip() + "\nPY"


def _identity(user: Mapping[str, str]) -> str:
    return (f"My name is {user['first_name']} {user['last_name']}. My email is {user['email']} and my phone "
            f"number is {user['phone_number']}.")


INTRO = """I am your supervisor, and you are an assistant who carries out my day-to-day tasks on my apps, on \
your own, one step at a time.

You work through the execute tool: each call runs one bash command in a fresh process in the working \
directory. Files persist between calls; shell variables, the working directory and Python variables do \
not, so print what you need and write values you learned into the next command. The apps are reachable \
from Python there: `from apis import apis`, then apis.<app>.<api>(**arguments) returns plain data or raises \
an error. Three APIs tell you what exists:

```bash
{example}
```

These are the apps available to me:

{apps}

Here is a worked example with a fictional account and mocked, abbreviated outputs. It is history only: \
none of its commands ran in your task, and its tokens and results are not yours.

{identity}

Task: {task}"""

RULES = """That was the example. Now the rules for the real task:
- Read the API docs of an app before using an API of it; use only the APIs and arguments they list.
- Each app needs its own login with my email and the password from apis.supervisor.show_account_passwords(); \
pass the access token explicitly to that app's other APIs.
- Lists come in pages: go on until a page comes back empty. An error is not an empty page.
- Turn a compound instruction into the exact set of items to act on, act on each, then read the state back.
- Work on task files through the file_system app, never through local files; read a file back before \
deleting or moving it.
- Do not guess: if a value is not in an API's output, find the API that gives it.
- apis.supervisor.complete_task(answer=...) only submits: call it once, at the end, with the answer (or with \
no answer when the task asks no question). Then reply with a short final message and no tool call."""

CURRENT = """{marker}
This is a new task: nothing from the example ran here and none of its values are live.

{identity}

Task: {task}"""


def _steps(app: str, password_of: str, list_api: str, items: str, pages: list[list[dict[str, Any]]],
           app_apis: list[dict[str, str]], list_doc: dict[str, Any]) -> list[DemoStep]:
    token = f"demo-{app}-token"
    count = sum(len(p) for p in pages)
    shown = "\n".join(f"page {i}: {len(p)} {items}" for i, p in enumerate(pages))
    return [
        DemoStep(thought="First, which apps exist, to find the one that holds the answer.",
                 code="print(apis.api_docs.show_app_descriptions())", output="<the app descriptions above>"),
        DemoStep(thought=f"The {app} app holds the {items}. Its APIs:",
                 code=f"print(apis.api_docs.show_api_descriptions(app_name={app!r}))",
                 output=json.dumps(app_apis, indent=1) + "\n[abbreviated to the relevant APIs]"),
        DemoStep(thought="I need to log in first. How does login work?",
                 code=f"print(apis.api_docs.show_api_doc(app_name={app!r}, api_name='login'))",
                 output=json.dumps({"app_name": app, "api_name": "login", "parameters": [
                     {"name": "username", "type": "string", "required": True},
                     {"name": "password", "type": "string", "required": True}],
                     "response": {"access_token": "string", "token_type": "string"}}, indent=1)),
        DemoStep(thought="The password is kept by the supervisor app.",
                 code="print(apis.api_docs.show_api_descriptions(app_name='supervisor'))",
                 output=json.dumps([{"name": "show_profile", "description": "Show your profile."},
                                    {"name": "show_account_passwords", "description": "Show your passwords."},
                                    {"name": "complete_task", "description": "Mark the task complete."}], indent=1)),
        DemoStep(thought=f"Now the passwords, to find the one for {app}.",
                 code="print(apis.supervisor.show_account_passwords())",
                 output=json.dumps([{"account_name": app, "password": password_of},
                                    {"account_name": "file_system", "password": "demo-fs-pass"}], indent=1)),
        DemoStep(thought="Log in with my email and that password; the token goes into every later call.",
                 code=f"print(apis.{app}.login(username={DEMO_USER['email']!r}, password={password_of!r}))",
                 output=json.dumps({"access_token": token, "token_type": "Bearer"})),
        DemoStep(thought=f"How does {list_api} page?",
                 code=f"print(apis.api_docs.show_api_doc(app_name={app!r}, api_name={list_api!r}))",
                 output=json.dumps(list_doc, indent=1)),
        DemoStep(thought="Go through every page until one comes back empty, counting as I go.",
                 code=(f"token = {token!r}\ntotal, page = 0, 0\nwhile True:\n"
                       f"    items = apis.{app}.{list_api}(access_token=token, page_index=page)\n"
                       f"    print(f'page {{page}}: {{len(items)}} {items}')\n    if not items:\n        break\n"
                       "    total += len(items)\n    page += 1\nprint('total', total)"),
                 output=f"{shown}\ntotal {count}"),
        DemoStep(thought="Before submitting, how does complete_task take the answer?",
                 code="print(apis.api_docs.show_api_doc(app_name='supervisor', api_name='complete_task'))",
                 output=json.dumps({"app_name": "supervisor", "api_name": "complete_task", "parameters": [
                     {"name": "answer", "type": "any", "required": False,
                      "description": "The answer, when the task asks a question."}]}, indent=1)),
        DemoStep(thought=f"{count} {items} in all pages together. Submit it.",
                 code=f"print(apis.supervisor.complete_task(answer={count}))",
                 output=json.dumps({"message": "Marked the active task complete."})),
    ]


def _pages(count: int, size: int, key: str, label: str) -> list[list[dict[str, Any]]]:
    items = [{key: i, "title": f"{label} {i}"} for i in range(1, count + 1)]
    return [items[i:i + size] for i in range(0, count, size)] + [[]]


def _list_doc(app: str, api: str, what: str) -> dict[str, Any]:
    return {"app_name": app, "api_name": api, "description": f"Show {what}, one page at a time.",
            "parameters": [{"name": "access_token", "type": "string", "required": True},
                           {"name": "page_index", "type": "integer", "required": False, "default": 0},
                           {"name": "page_limit", "type": "integer", "required": False, "default": 5}]}


APPWORLD_DEMO = Demonstration(
    task="How many playlists do I have in my Spotify playlist library?",
    steps=_steps("spotify", "demo-spotify-pass", "show_playlist_library", "playlists",
                 _pages(23, 5, "playlist_id", "Demo playlist"),
                 [{"name": "login", "description": "Login to your account."},
                  {"name": "show_playlist_library", "description": "Search or show a list of your playlists."},
                  {"name": "show_song", "description": "Get details of a specific song."}],
                 _list_doc("spotify", "show_playlist_library", "your playlists")),
)
LITE_DEMO = Demonstration(
    task="How many notes do I have in my notes app?",
    steps=_steps("notes", "demo-notes-pass", "show_notes", "notes", _pages(13, 5, "note_id", "Demo note"),
                 [{"name": "login", "description": "Log in to the notes app."},
                  {"name": "show_notes", "description": "Your notes, a page at a time, optionally filtered."},
                  {"name": "create_note", "description": "Create a note."}],
                 _list_doc("notes", "show_notes", "your notes")),
)


def build_opening(demo: Demonstration, instruction: str, supervisor: Mapping[str, str],
                  app_descriptions: Sequence[Mapping[str, Any]]) -> list[Message]:
    """The 23 messages that follow the system prompt: introduction, ten demonstrated calls and their
    outputs, the rules, and the real task behind the marker."""
    apps = sorted(({"name": str(a["name"]), "description": str(a.get("description", ""))}
                   for a in app_descriptions if a.get("name") != "admin"), key=lambda a: a["name"])
    apps_text = json.dumps(apps, indent=1)
    example = _py("print(apis.api_docs.show_app_descriptions())\n"
                  "print(apis.api_docs.show_api_descriptions(app_name='supervisor'))\n"
                  "print(apis.api_docs.show_api_doc(app_name='supervisor', api_name='show_account_passwords'))")
    messages = [Message(role="user", content=INTRO.format(example=example, apps=apps_text,
                                                          identity=_identity(DEMO_USER), task=demo.task))]
    for n, step in enumerate(demo.steps, 1):
        call_id = f"demo_{n}"
        output = apps_text if step.output == "<the app descriptions above>" else step.output
        messages.append(Message(role="assistant", content=step.thought, tool_calls=[ChatToolCall(
            id=call_id, function=FunctionCall(name="execute", arguments={"command": _py(step.code)}))]))
        messages.append(Message(role="tool", tool_call_id=call_id, name="execute",
                                content=f"{output}\n[exit_code=0]"))
    messages.append(Message(role="user", content=RULES))
    messages.append(Message(role="user", content=CURRENT.format(marker=CURRENT_TASK_MARKER,
                                                                identity=_identity(supervisor), task=instruction)))
    return messages
