"""What every app of appworld_lite is built from: the SQLite schema, the API registry (`api`, `APPS`), what
an implementation sees (`Ctx`), money and paging helpers, and the dispatch that validates and runs one call
as one transaction (`call`). The apps themselves live in `app_apis/`, one module each."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_PAGE_LIMIT = 5
MAX_PAGE_LIMIT = 20

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE profile (id INTEGER PRIMARY KEY CHECK (id = 1), first_name TEXT, last_name TEXT, email TEXT,
                      phone_number TEXT);
CREATE TABLE accounts (app TEXT PRIMARY KEY, password TEXT NOT NULL);
CREATE TABLE tokens (token TEXT PRIMARY KEY, app TEXT NOT NULL);
CREATE TABLE completion (id INTEGER PRIMARY KEY CHECK (id = 1), answer TEXT);
CREATE TABLE contacts (contact_id INTEGER PRIMARY KEY AUTOINCREMENT, first_name TEXT NOT NULL, last_name TEXT NOT NULL,
                       email TEXT NOT NULL, phone_number TEXT, relationship TEXT, created_at TEXT NOT NULL);
CREATE TABLE messages (message_id INTEGER PRIMARY KEY AUTOINCREMENT, sender_email TEXT NOT NULL,
                       receiver_email TEXT NOT NULL, text TEXT NOT NULL, sent_at TEXT NOT NULL,
                       is_read INTEGER NOT NULL DEFAULT 0);
CREATE TABLE wallet (id INTEGER PRIMARY KEY CHECK (id = 1), balance_cents INTEGER NOT NULL);
CREATE TABLE transactions (transaction_id INTEGER PRIMARY KEY AUTOINCREMENT, sender_email TEXT NOT NULL,
                           receiver_email TEXT NOT NULL, amount_cents INTEGER NOT NULL, description TEXT NOT NULL,
                           created_at TEXT NOT NULL);
CREATE TABLE payment_requests (payment_request_id INTEGER PRIMARY KEY AUTOINCREMENT, sender_email TEXT NOT NULL,
                               receiver_email TEXT NOT NULL, amount_cents INTEGER NOT NULL,
                               description TEXT NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL,
                               updated_at TEXT NOT NULL);
CREATE TABLE songs (song_id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL, artist TEXT NOT NULL,
                    genre TEXT NOT NULL, duration INTEGER NOT NULL);
CREATE TABLE library (song_id INTEGER PRIMARY KEY REFERENCES songs (song_id), added_at TEXT NOT NULL);
CREATE TABLE playlists (playlist_id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE playlist_songs (playlist_id INTEGER NOT NULL REFERENCES playlists (playlist_id),
                             song_id INTEGER NOT NULL REFERENCES songs (song_id), PRIMARY KEY (playlist_id, song_id));
CREATE TABLE notes (note_id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL, content TEXT NOT NULL,
                    tags TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE files (file_id INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT NOT NULL UNIQUE, content TEXT NOT NULL,
                    created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
"""

# Tables that are bookkeeping, not world state: never part of a state comparison.
BOOKKEEPING_TABLES = ("meta", "tokens", "completion")


class AppError(Exception):
    """An API call failed; the message reads like AppWorld's HTTP errors."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(status, message)
        self.status, self.message = status, message

    def __str__(self) -> str:
        return f"Response status code is {self.status}:\n{json.dumps({'message': self.message})}"


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # string, integer, number, boolean, list, any (a plain value)
    description: str
    required: bool = False
    default: Any = None


@dataclass(frozen=True)
class Api:
    app: str
    name: str
    description: str
    returns: str
    params: tuple[Param, ...]
    func: Callable[..., Any]
    auth: bool
    paged: bool

    def doc(self) -> dict[str, Any]:
        return {
            "app_name": self.app,
            "api_name": self.name,
            "description": self.description,
            "parameters": [
                {"name": p.name, "type": p.type, "required": p.required, "default": p.default,
                 "description": p.description}
                for p in self.params
            ],
            "returns": self.returns,
        }


APP_DESCRIPTIONS = {
    "api_docs": "Documentation of every app and API: start here.",
    "supervisor": "The person you work for: profile, account passwords, and complete_task to submit the task.",
    "contacts": "The supervisor's address book: people, their emails, phone numbers and relationships.",
    "messages": "Text messages the supervisor sent and received.",
    "payments": "A wallet: balance, money transfers and payment requests between people.",
    "music": "A music service: song catalogue, the supervisor's song library and playlists.",
    "notes": "The supervisor's notes, with titles, tags and contents.",
    "file_system": "The supervisor's files, addressed by paths such as ~/documents/report.txt.",
}
APPS: dict[str, dict[str, Api]] = {name: {} for name in APP_DESCRIPTIONS}

TOKEN = Param("access_token", "string", "The access token returned by this app's login.", required=True)
PAGE = (
    Param("page_index", "integer", "Which page of results to return, from 0.", default=0),
    Param("page_limit", "integer", f"Results per page, 1 to {MAX_PAGE_LIMIT}.", default=DEFAULT_PAGE_LIMIT),
)


def api(app: str, description: str, returns: str, *params: Param, auth: bool = True, paged: bool = False
        ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a function as `apis.<app>.<name>`; the access token and paging parameters are added here."""

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        full = ((TOKEN,) if auth else ()) + params + (PAGE if paged else ())
        APPS[app][func.__name__] = Api(app, func.__name__, description, returns, full, func, auth, paged)
        return func

    return register


class Ctx:
    """What an API implementation sees: the open database, the supervisor, and for a list API the page asked for
    (the dispatch checks `page_index` and `page_limit`; the implementation reads its rows with `paged`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.page_index, self.page_limit = 0, DEFAULT_PAGE_LIMIT
        row = conn.execute("SELECT email FROM profile").fetchone()
        self.me = row[0] if row else ""
        self.now = self.meta("now")

    def meta(self, key: str) -> str:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else ""

    def rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        cur = self.conn.execute(sql, args)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def paged(self, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """The rows of the page asked for; `sql` is the whole list, ordered."""
        return self.rows(f"{sql} LIMIT {self.page_limit} OFFSET {self.page_index * self.page_limit}", args)

    def page_of(self, items: list[T]) -> list[T]:
        """The page asked for of a list built in Python."""
        return items[self.page_index * self.page_limit:(self.page_index + 1) * self.page_limit]

    def one(self, sql: str, args: tuple[Any, ...], what: str) -> dict[str, Any]:
        rows = self.rows(sql, args)
        if not rows:
            raise AppError(404, f"No {what} found.")
        return rows[0]

    def insert(self, table: str, **values: Any) -> int:
        cols = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        cur = self.conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})", tuple(values.values()))
        return int(cur.lastrowid or 0)


def dollars(cents: int) -> float:
    return round(cents / 100.0, 2)


def cents(amount: float) -> int:
    if amount <= 0:
        raise AppError(422, "The amount must be positive.")
    return int(round(amount * 100))


def like(text: str | None) -> str:
    return f"%{(text or '').lower()}%"


# ---------------------------------------------------------------- dispatch

TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float),
                                      "boolean": (bool,), "list": (list,), "any": (str, int, float, bool)}


def coerce(spec: Api, param: Param, value: Any) -> Any:
    """Accept what a JSON API would (numbers given as digit strings); refuse the rest with a 422."""
    if value is None:
        return None
    if param.type in ("integer", "number") and isinstance(value, str):
        try:
            value = int(value) if param.type == "integer" else float(value)
        except ValueError:
            pass
    if param.type == "list" and isinstance(value, str):
        return value
    if not isinstance(value, TYPES[param.type]) or (isinstance(value, bool) and param.type != "boolean"):
        wanted = "text or a number" if param.type == "any" else f"of type {param.type}"
        raise AppError(422, f"Parameter {param.name!r} of {spec.app}.{spec.name} must be {wanted}, "
                       f"not {type(value).__name__}.")
    return value


def find(app: str, api_name: str) -> Api:
    if app not in APPS:
        raise AppError(404, f"No app named {app!r}. Apps: {', '.join(APPS)}.")
    if api_name not in APPS[app]:
        raise AppError(404, f"No API named {api_name!r} in app {app!r}. See "
                       f"apis.api_docs.show_api_descriptions(app_name={app!r}).")
    return APPS[app][api_name]


def call(conn: sqlite3.Connection, app: str, api_name: str, arguments: dict[str, Any]) -> Any:
    """Run one API call as one transaction: validated like a web API, rolled back on any error."""
    spec = find(app, api_name)
    known = {p.name: p for p in spec.params}
    unknown = sorted(k for k in arguments if k not in known)
    if unknown:
        raise AppError(422, f"Unexpected parameter(s) {', '.join(unknown)} for {app}.{api_name}; its parameters "
                       f"are: {', '.join(known) or 'none'}. See apis.api_docs.show_api_doc(app_name={app!r}, "
                       f"api_name={api_name!r}).")
    missing = [p.name for p in spec.params if p.required and arguments.get(p.name) is None]
    if missing:
        raise AppError(422, f"Missing required parameter(s) {', '.join(missing)} for {app}.{api_name}.")
    values = {name: coerce(spec, p, arguments.get(name, p.default)) for name, p in known.items()}
    try:
        ctx = Ctx(conn)
        if spec.auth:
            row = ctx.rows("SELECT app FROM tokens WHERE token = ?", (values.pop("access_token"),))
            if not row or row[0]["app"] != app:
                raise AppError(401, f"You are not authorized to use {app} APIs: the access token is missing, "
                               f"invalid or belongs to another app. Log in with apis.{app}.login(...).")
        if spec.paged:
            ctx.page_index, ctx.page_limit = int(values.pop("page_index")), int(values.pop("page_limit"))
            if ctx.page_index < 0:
                raise AppError(422, "page_index must be 0 or more.")
            if not 1 <= ctx.page_limit <= MAX_PAGE_LIMIT:
                raise AppError(422, f"page_limit must be between 1 and {MAX_PAGE_LIMIT}.")
        result = spec.func(ctx, **values)
        conn.commit()
        return result
    except BaseException:
        conn.rollback()
        raise


def connect(path: str) -> sqlite3.Connection:
    """A connection for one call. No fsync per write: a trial's world need not survive a power cut, and
    a crash mid-call still leaves the file consistent (the rollback journal stays on)."""
    conn = sqlite3.connect(path, timeout=30)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = OFF")
    return conn
