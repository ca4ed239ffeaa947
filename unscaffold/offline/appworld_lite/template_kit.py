"""What every task template is made of: the gold as API calls (`Call`, `Outcome`), reading a world through
its APIs (`Query`, all pages or only the first), the reference scripts' shared prelude, paging helper and
submission, the `Template` interface, and `evaluate`, which decides whether a task needs more than the first page.
The templates themselves are in `templates.py`."""

from __future__ import annotations

import sqlite3
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from . import apps
from .world import WorldBuilder


@dataclass(frozen=True)
class Ref:
    """An id created by an earlier effect (e.g. the new playlist's `playlist_id`)."""

    key: str


@dataclass(frozen=True)
class Call:
    app: str
    api: str
    args: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, app: str, api: str, **args: Any) -> Call:
        return cls(app, api, tuple(sorted(args.items())))


@dataclass(frozen=True)
class Outcome:
    answer: Any = None
    effects: tuple[Call, ...] = ()


class Query:
    """Reads a world through its APIs: all pages, or only the first page of each list."""

    def __init__(self, conn: sqlite3.Connection, first_page_only: bool = False) -> None:
        self.conn, self.first_page_only = conn, first_page_only
        self._tokens: dict[str, str] = {}

    def call(self, app: str, api: str, **args: Any) -> Any:
        spec = apps.find(app, api)
        if spec.auth:
            args["access_token"] = self.token(app)
        return apps.call(self.conn, app, api, args)

    def token(self, app: str) -> str:
        if app not in self._tokens:
            email = apps.call(self.conn, "supervisor", "show_profile", {})["email"]
            passwords = {a["account_name"]: a["password"]
                         for a in apps.call(self.conn, "supervisor", "show_account_passwords", {})}
            login = apps.call(self.conn, app, "login", {"username": email, "password": passwords[app]})
            self._tokens[app] = login["access_token"]
        return self._tokens[app]

    def pages(self, app: str, api: str, **args: Any) -> list[Any]:
        items: list[Any] = []
        page = 0
        while True:
            batch = self.call(app, api, **args, page_index=page)
            items += batch
            if not batch or self.first_page_only:
                return items
            page += 1


def apply_effects(conn: sqlite3.Connection, effects: tuple[Call, ...]) -> None:
    """Carry out the gold calls on a scratch copy of the initial world (ids of created rows resolved)."""
    query = Query(conn)
    created: dict[str, Any] = {}
    for effect in effects:
        args = {k: created[v.key] if isinstance(v, Ref) else v for k, v in effect.args}
        result = query.call(effect.app, effect.api, **args)
        if isinstance(result, dict):
            created.update({k: v for k, v in result.items() if k.endswith("_id")})


PRELUDE = '''from apis import apis

me = apis.supervisor.show_profile()
passwords = {a["account_name"]: a["password"] for a in apis.supervisor.show_account_passwords()}


def login(app):
    return apis[app].login(username=me["email"], password=passwords[app])["access_token"]


'''
PAGING = {
    "all": '''def all_pages(api, **arguments):
    items, page = [], 0
    while True:
        batch = api(**arguments, page_index=page)
        if not batch:
            return items
        items += batch
        page += 1


''',
    "first": '''def all_pages(api, **arguments):
    return api(**arguments, page_index=0)


''',
}


def heredoc(code: str) -> str:
    return f"python3 - <<'EOF'\n{code.rstrip()}\nEOF"


class Template(ABC):
    name: str
    doc_apis: tuple[tuple[str, str], ...]
    answer: str | None = None  # the reference script's expression for the answer; None: the task asks no question

    @abstractmethod
    def plant(self, b: WorldBuilder) -> dict[str, Any]:
        """Add the task's data to the world; return the task's parameters."""

    @abstractmethod
    def task(self, p: dict[str, Any]) -> str:
        """The request, in the supervisor's words."""

    @abstractmethod
    def outcome(self, q: Query, p: dict[str, Any]) -> Outcome:
        """The answer and the changes the task asks for, read through `q`."""

    @abstractmethod
    def solution(self, p: dict[str, Any]) -> str:
        """The body of a reference script (after the login and paging helpers, before the submission)."""

    def scripts(self, p: dict[str, Any], paging: str = "all") -> list[str]:
        """Python scripts: look the APIs up, then solve (`paging="first"` reads one page per list)."""
        docs = "\n".join(f"print(apis.api_docs.show_api_doc(app_name={app!r}, api_name={api!r}))"
                         for app, api in self.doc_apis)
        submit = f"apis.supervisor.complete_task({f'answer={self.answer}' if self.answer else ''})\n"
        return [f"from apis import apis\n{docs}\n", PRELUDE + PAGING[paging] + self.solution(p) + submit]

    def commands(self, p: dict[str, Any], paging: str = "all") -> list[str]:
        """The scripts as `execute` commands: what the oracle (or a first-page-only replay) runs."""
        return [heredoc(script) for script in self.scripts(p, paging)]


@dataclass
class Instance:
    """One task's world and its gold, as the catalog keeps them (outside any workspace)."""

    params: dict[str, Any]
    outcome: Outcome
    needs_all_pages: bool
    extra: dict[str, Any] = field(default_factory=dict)


def evaluate(template: Template, conn: sqlite3.Connection, params: dict[str, Any]) -> Instance:
    """Gold from all pages; the first-page-only outcome decides whether the task needs more pages."""
    full = template.outcome(Query(conn), params)
    try:
        first: Outcome | None = template.outcome(Query(conn, first_page_only=True), params)
    except (StopIteration, IndexError, KeyError):
        first = None
    return Instance(params=params, outcome=full, needs_all_pages=first != full)
