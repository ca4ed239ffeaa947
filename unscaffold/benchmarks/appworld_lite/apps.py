"""The apps of appworld_lite over one SQLite file: supervisor, api_docs, contacts, messages, payments, music,
notes and file_system.

It runs on the host only, never in the workspace: the world's server (`server.py`) answers the student's
calls with it, and the verifier runs the same code in-process to apply the gold changes, so the student
and the gold can never disagree about how an API behaves.

Conventions follow AppWorld: per-app `login(username, password)` returning an access token that every
other call of that app must pass explicitly; list APIs take `page_index` (from 0) and `page_limit`
(default 5, at most 20) and return an empty list past the end; errors carry an HTTP-like status."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
    """What an API implementation sees: the open database and the supervisor."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
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


def page_sql(page_index: int, page_limit: int) -> str:
    return f" LIMIT {int(page_limit)} OFFSET {int(page_index) * int(page_limit)}"


def dollars(cents: int) -> float:
    return round(cents / 100.0, 2)


def cents(amount: float) -> int:
    if amount <= 0:
        raise AppError(422, "The amount must be positive.")
    return int(round(amount * 100))


def like(text: str | None) -> str:
    return f"%{(text or '').lower()}%"


# ---------------------------------------------------------------- supervisor and api_docs


@api("supervisor", "Show the supervisor's profile.", "{first_name, last_name, email, phone_number}", auth=False)
def show_profile(ctx: Ctx) -> dict[str, Any]:
    return ctx.one("SELECT first_name, last_name, email, phone_number FROM profile", (), "profile")


@api("supervisor", "Show the supervisor's password for each app account.", "[{account_name, password}]", auth=False)
def show_account_passwords(ctx: Ctx) -> list[dict[str, Any]]:
    return ctx.rows("SELECT app AS account_name, password FROM accounts ORDER BY app")


@api("supervisor", "Mark the task complete and submit the answer (omit it when the task asks for none). "
     "It only submits: do every change the task asks for before calling it.", "{message}",
     Param("answer", "any", "The answer (text or a number), when the task asks a question."),
     auth=False)
def complete_task(ctx: Ctx, answer: Any = None) -> dict[str, Any]:
    if ctx.rows("SELECT 1 FROM completion"):
        raise AppError(409, "The task is already completed.")
    ctx.insert("completion", id=1, answer=json.dumps(answer))
    return {"message": "The task is marked complete."}


@api("api_docs", "List the apps with a short description of each.", "[{name, description}]", auth=False)
def show_app_descriptions(ctx: Ctx) -> list[dict[str, str]]:
    return [{"name": name, "description": text} for name, text in APP_DESCRIPTIONS.items()]


def _app(app_name: str) -> dict[str, Api]:
    if app_name not in APPS:
        raise AppError(422, f"No app named {app_name!r}. Apps: {', '.join(APPS)}.")
    return APPS[app_name]


@api("api_docs", "List the APIs of an app with a short description of each.", "[{name, description}]",
     Param("app_name", "string", "The app, e.g. contacts.", required=True), auth=False)
def show_api_descriptions(ctx: Ctx, app_name: str) -> list[dict[str, str]]:
    return [{"name": a.name, "description": a.description} for a in _app(app_name).values()]


@api("api_docs", "Show the full documentation of one API: its parameters, their types and defaults, and what "
     "it returns.", "{app_name, api_name, description, parameters, returns}",
     Param("app_name", "string", "The app, e.g. contacts.", required=True),
     Param("api_name", "string", "The API, e.g. show_contacts.", required=True), auth=False)
def show_api_doc(ctx: Ctx, app_name: str, api_name: str) -> dict[str, Any]:
    apis = _app(app_name)
    if api_name not in apis:
        raise AppError(422, f"No API named {api_name!r} in app {app_name!r}. APIs: {', '.join(apis)}.")
    return apis[api_name].doc()


def _login(ctx: Ctx, app: str, username: str, password: str) -> dict[str, Any]:
    row = ctx.rows("SELECT password FROM accounts WHERE app = ?", (app,))
    if username != ctx.me or not row or row[0]["password"] != password:
        raise AppError(401, "Invalid username or password.")
    issued = int(ctx.meta("tokens_issued") or 0) + 1
    token = hashlib.sha256(f"{ctx.meta('secret')}|{app}|{issued}".encode()).hexdigest()[:32]
    ctx.conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('tokens_issued', ?)", (str(issued),))
    ctx.insert("tokens", token=token, app=app)
    return {"access_token": token, "token_type": "Bearer"}


LOGIN_PARAMS = (Param("username", "string", "The supervisor's email address.", required=True),
                Param("password", "string", "The password of the supervisor's account in this app.", required=True))


def _register_login(app: str) -> None:
    def login(ctx: Ctx, username: str, password: str) -> dict[str, Any]:
        return _login(ctx, app, username, password)

    login.__name__ = "login"
    api(app, "Log in to this app; pass the returned access_token to its other APIs.", "{access_token, token_type}",
        *LOGIN_PARAMS, auth=False)(login)


for _name in ("contacts", "messages", "payments", "music", "notes", "file_system"):
    _register_login(_name)

# ---------------------------------------------------------------- contacts

CONTACT = "contact_id, first_name, last_name, email, phone_number, relationship"


@api("contacts", "List contacts, optionally only those matching a name or email query or a relationship.",
     "[{contact_id, first_name, last_name, email, phone_number, relationship}]",
     Param("query", "string", "Part of a name (first, last or full) or an email."),
     Param("relationship", "string", "e.g. friend, coworker, family, neighbor, roommate."), paged=True)
def show_contacts(ctx: Ctx, query: str | None, relationship: str | None, page_index: int, page_limit: int
                  ) -> list[dict[str, Any]]:
    sql = (f"SELECT {CONTACT} FROM contacts WHERE (? IS NULL OR lower(first_name || ' ' || last_name) LIKE ? "
           "OR lower(email) LIKE ?) AND (? IS NULL OR relationship = ?) ORDER BY contact_id")
    return ctx.rows(sql + page_sql(page_index, page_limit), (query, like(query), like(query), relationship,
                                                             relationship))


@api("contacts", "Show one contact.", "{contact_id, first_name, last_name, email, phone_number, relationship, "
     "created_at}", Param("contact_id", "integer", "The contact.", required=True))
def show_contact(ctx: Ctx, contact_id: int) -> dict[str, Any]:
    return ctx.one(f"SELECT {CONTACT}, created_at FROM contacts WHERE contact_id = ?", (contact_id,), "contact")


CONTACT_FIELDS = (
    Param("first_name", "string", "First name."),
    Param("last_name", "string", "Last name."),
    Param("email", "string", "Email address."),
    Param("phone_number", "string", "Phone number, e.g. 555-0134."),
    Param("relationship", "string", "e.g. friend, coworker, family, neighbor, roommate."),
)


@api("contacts", "Add a contact.", "{message, contact_id}",
     *(Param(p.name, p.type, p.description, required=p.name in ("first_name", "last_name", "email"))
       for p in CONTACT_FIELDS))
def add_contact(ctx: Ctx, first_name: str, last_name: str, email: str, phone_number: str | None,
                relationship: str | None) -> dict[str, Any]:
    contact_id = ctx.insert("contacts", first_name=first_name, last_name=last_name, email=email,
                            phone_number=phone_number, relationship=relationship, created_at=ctx.now)
    return {"message": "Contact added.", "contact_id": contact_id}


@api("contacts", "Change fields of a contact; only the fields given change.", "{message}",
     Param("contact_id", "integer", "The contact.", required=True), *CONTACT_FIELDS)
def update_contact(ctx: Ctx, contact_id: int, **fields: Any) -> dict[str, Any]:
    ctx.one("SELECT contact_id FROM contacts WHERE contact_id = ?", (contact_id,), "contact")
    changes = {k: v for k, v in fields.items() if v is not None}
    if not changes:
        raise AppError(422, "Give at least one field to change.")
    for key, value in changes.items():
        ctx.conn.execute(f"UPDATE contacts SET {key} = ? WHERE contact_id = ?", (value, contact_id))
    return {"message": "Contact updated."}


@api("contacts", "Delete a contact.", "{message}", Param("contact_id", "integer", "The contact.", required=True))
def delete_contact(ctx: Ctx, contact_id: int) -> dict[str, Any]:
    ctx.one("SELECT contact_id FROM contacts WHERE contact_id = ?", (contact_id,), "contact")
    ctx.conn.execute("DELETE FROM contacts WHERE contact_id = ?", (contact_id,))
    return {"message": "Contact deleted."}


# ---------------------------------------------------------------- messages

MESSAGE = "message_id, sender_email, receiver_email, text, sent_at, is_read"


def _message_row(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "is_read": bool(row["is_read"])}


@api("messages", "List messages the supervisor sent or received, newest first.",
     "[{message_id, sender_email, receiver_email, text, sent_at, is_read}]",
     Param("sender_email", "string", "Only messages from this email."),
     Param("receiver_email", "string", "Only messages to this email."),
     Param("query", "string", "Only messages whose text contains this."), paged=True)
def show_messages(ctx: Ctx, sender_email: str | None, receiver_email: str | None, query: str | None,
                  page_index: int, page_limit: int) -> list[dict[str, Any]]:
    sql = (f"SELECT {MESSAGE} FROM messages WHERE (? IS NULL OR sender_email = ?) AND (? IS NULL OR "
           "receiver_email = ?) AND (? IS NULL OR lower(text) LIKE ?) ORDER BY sent_at DESC, message_id DESC")
    args = (sender_email, sender_email, receiver_email, receiver_email, query, like(query))
    return [_message_row(r) for r in ctx.rows(sql + page_sql(page_index, page_limit), args)]


@api("messages", "Show one message.", "{message_id, sender_email, receiver_email, text, sent_at, is_read}",
     Param("message_id", "integer", "The message.", required=True))
def show_message(ctx: Ctx, message_id: int) -> dict[str, Any]:
    return _message_row(ctx.one(f"SELECT {MESSAGE} FROM messages WHERE message_id = ?", (message_id,), "message"))


@api("messages", "Send a text message.", "{message, message_id}",
     Param("receiver_email", "string", "Who gets the message.", required=True),
     Param("message", "string", "The text to send.", required=True))
def send_message(ctx: Ctx, receiver_email: str, message: str) -> dict[str, Any]:
    if not message.strip():
        raise AppError(422, "The message is empty.")
    message_id = ctx.insert("messages", sender_email=ctx.me, receiver_email=receiver_email, text=message,
                            sent_at=ctx.now, is_read=1)
    return {"message": "Message sent.", "message_id": message_id}


@api("messages", "Delete a message.", "{message}", Param("message_id", "integer", "The message.", required=True))
def delete_message(ctx: Ctx, message_id: int) -> dict[str, Any]:
    ctx.one("SELECT message_id FROM messages WHERE message_id = ?", (message_id,), "message")
    ctx.conn.execute("DELETE FROM messages WHERE message_id = ?", (message_id,))
    return {"message": "Message deleted."}


# ---------------------------------------------------------------- payments

TRANSACTION = "transaction_id, sender_email, receiver_email, amount_cents, description, created_at"
REQUEST = ("payment_request_id, sender_email, receiver_email, amount_cents, description, status, created_at, "
           "updated_at")


def _money_row(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if k != "amount_cents"}
    out["amount"] = dollars(row["amount_cents"])
    return out


def _pay(ctx: Ctx, receiver_email: str, amount_cents: int, description: str) -> int:
    balance = ctx.one("SELECT balance_cents FROM wallet", (), "wallet")["balance_cents"]
    if amount_cents > balance:
        raise AppError(422, "The balance is too low for this payment.")
    ctx.conn.execute("UPDATE wallet SET balance_cents = ?", (balance - amount_cents,))
    return ctx.insert("transactions", sender_email=ctx.me, receiver_email=receiver_email, amount_cents=amount_cents,
                      description=description, created_at=ctx.now)


@api("payments", "Show the wallet balance in dollars.", "{balance}")
def show_balance(ctx: Ctx) -> dict[str, Any]:
    return {"balance": dollars(ctx.one("SELECT balance_cents FROM wallet", (), "wallet")["balance_cents"])}


@api("payments", "List money transfers, newest first.",
     "[{transaction_id, sender_email, receiver_email, amount, description, created_at}]",
     Param("direction", "string", "sent or received; both when omitted."),
     Param("user_email", "string", "Only transfers with this person."), paged=True)
def show_transactions(ctx: Ctx, direction: str | None, user_email: str | None, page_index: int, page_limit: int
                      ) -> list[dict[str, Any]]:
    if direction not in (None, "sent", "received"):
        raise AppError(422, "direction must be 'sent' or 'received'.")
    where = {"sent": "sender_email = ?", "received": "receiver_email = ?"}.get(direction or "", "? IS NOT NULL")
    sql = (f"SELECT {TRANSACTION} FROM transactions WHERE {where} AND (? IS NULL OR sender_email = ? OR "
           "receiver_email = ?) ORDER BY created_at DESC, transaction_id DESC")
    rows = ctx.rows(sql + page_sql(page_index, page_limit), (ctx.me, user_email, user_email, user_email))
    return [_money_row(r) for r in rows]


@api("payments", "Show one money transfer.",
     "{transaction_id, sender_email, receiver_email, amount, description, created_at}",
     Param("transaction_id", "integer", "The transfer.", required=True))
def show_transaction(ctx: Ctx, transaction_id: int) -> dict[str, Any]:
    return _money_row(ctx.one(f"SELECT {TRANSACTION} FROM transactions WHERE transaction_id = ?", (transaction_id,),
                              "transaction"))


@api("payments", "Send money from the wallet.", "{message, transaction_id}",
     Param("receiver_email", "string", "Who gets the money.", required=True),
     Param("amount", "number", "Dollars, more than 0.", required=True),
     Param("description", "string", "What it is for.", default=""))
def send_money(ctx: Ctx, receiver_email: str, amount: float, description: str) -> dict[str, Any]:
    return {"message": "Money sent.", "transaction_id": _pay(ctx, receiver_email, cents(amount), description)}


@api("payments", "List payment requests, newest first. Incoming requests ask the supervisor to pay; outgoing "
     "ones ask someone else to pay the supervisor.",
     "[{payment_request_id, sender_email, receiver_email, amount, description, status, created_at, updated_at}]",
     Param("status", "string", "pending, approved or denied."),
     Param("direction", "string", "incoming or outgoing; both when omitted."), paged=True)
def show_payment_requests(ctx: Ctx, status: str | None, direction: str | None, page_index: int, page_limit: int
                          ) -> list[dict[str, Any]]:
    if direction not in (None, "incoming", "outgoing"):
        raise AppError(422, "direction must be 'incoming' or 'outgoing'.")
    where = {"incoming": "receiver_email = ?", "outgoing": "sender_email = ?"}.get(direction or "", "? IS NOT NULL")
    sql = (f"SELECT {REQUEST} FROM payment_requests WHERE {where} AND (? IS NULL OR status = ?) "
           "ORDER BY created_at DESC, payment_request_id DESC")
    return [_money_row(r) for r in ctx.rows(sql + page_sql(page_index, page_limit), (ctx.me, status, status))]


@api("payments", "Show one payment request.",
     "{payment_request_id, sender_email, receiver_email, amount, description, status, created_at, updated_at}",
     Param("payment_request_id", "integer", "The request.", required=True))
def show_payment_request(ctx: Ctx, payment_request_id: int) -> dict[str, Any]:
    return _money_row(_request(ctx, payment_request_id))


def _request(ctx: Ctx, payment_request_id: int) -> dict[str, Any]:
    return ctx.one(f"SELECT {REQUEST} FROM payment_requests WHERE payment_request_id = ?", (payment_request_id,),
                   "payment request")


@api("payments", "Ask someone to pay the supervisor.", "{message, payment_request_id}",
     Param("user_email", "string", "Who is asked to pay.", required=True),
     Param("amount", "number", "Dollars, more than 0.", required=True),
     Param("description", "string", "What it is for.", default=""))
def create_payment_request(ctx: Ctx, user_email: str, amount: float, description: str) -> dict[str, Any]:
    request_id = ctx.insert("payment_requests", sender_email=ctx.me, receiver_email=user_email,
                            amount_cents=cents(amount), description=description, status="pending",
                            created_at=ctx.now, updated_at=ctx.now)
    return {"message": "Payment request sent.", "payment_request_id": request_id}


def _pending_incoming(ctx: Ctx, payment_request_id: int) -> dict[str, Any]:
    row = _request(ctx, payment_request_id)
    if row["receiver_email"] != ctx.me:
        raise AppError(422, "Only requests sent to the supervisor can be approved or denied.")
    if row["status"] != "pending":
        raise AppError(409, f"The request is already {row['status']}.")
    return row


@api("payments", "Approve an incoming pending payment request: the money is sent now.",
     "{message, transaction_id}", Param("payment_request_id", "integer", "The request.", required=True))
def approve_payment_request(ctx: Ctx, payment_request_id: int) -> dict[str, Any]:
    row = _pending_incoming(ctx, payment_request_id)
    transaction_id = _pay(ctx, row["sender_email"], row["amount_cents"], row["description"])
    ctx.conn.execute("UPDATE payment_requests SET status = 'approved', updated_at = ? WHERE payment_request_id = ?",
                     (ctx.now, payment_request_id))
    return {"message": "Request approved and paid.", "transaction_id": transaction_id}


@api("payments", "Deny an incoming pending payment request.", "{message}",
     Param("payment_request_id", "integer", "The request.", required=True))
def deny_payment_request(ctx: Ctx, payment_request_id: int) -> dict[str, Any]:
    _pending_incoming(ctx, payment_request_id)
    ctx.conn.execute("UPDATE payment_requests SET status = 'denied', updated_at = ? WHERE payment_request_id = ?",
                     (ctx.now, payment_request_id))
    return {"message": "Request denied."}


# ---------------------------------------------------------------- music

SONG = "song_id, title, artist, genre, duration"


@api("music", "Search the song catalogue.", "[{song_id, title, artist, genre, duration}] (duration in seconds)",
     Param("query", "string", "Part of a title."), Param("artist", "string", "Exact artist name."),
     Param("genre", "string", "Exact genre."), paged=True)
def search_songs(ctx: Ctx, query: str | None, artist: str | None, genre: str | None, page_index: int,
                 page_limit: int) -> list[dict[str, Any]]:
    sql = (f"SELECT {SONG} FROM songs WHERE (? IS NULL OR lower(title) LIKE ?) AND (? IS NULL OR artist = ?) "
           "AND (? IS NULL OR genre = ?) ORDER BY song_id")
    return ctx.rows(sql + page_sql(page_index, page_limit), (query, like(query), artist, artist, genre, genre))


@api("music", "Show one song.", "{song_id, title, artist, genre, duration} (duration in seconds)",
     Param("song_id", "integer", "The song.", required=True))
def show_song(ctx: Ctx, song_id: int) -> dict[str, Any]:
    return ctx.one(f"SELECT {SONG} FROM songs WHERE song_id = ?", (song_id,), "song")


@api("music", "List the songs in the supervisor's library, most recently added first.",
     "[{song_id, title, artist, genre, duration, added_at}]", paged=True)
def show_song_library(ctx: Ctx, page_index: int, page_limit: int) -> list[dict[str, Any]]:
    sql = ("SELECT s.song_id, s.title, s.artist, s.genre, s.duration, l.added_at FROM library l JOIN songs s "
           "ON s.song_id = l.song_id ORDER BY l.added_at DESC, s.song_id DESC")
    return ctx.rows(sql + page_sql(page_index, page_limit))


@api("music", "List the supervisor's playlists.", "[{playlist_id, title, song_count, created_at}]", paged=True)
def show_playlists(ctx: Ctx, page_index: int, page_limit: int) -> list[dict[str, Any]]:
    sql = ("SELECT p.playlist_id, p.title, (SELECT count(*) FROM playlist_songs x WHERE x.playlist_id = "
           "p.playlist_id) AS song_count, p.created_at FROM playlists p ORDER BY p.playlist_id")
    return ctx.rows(sql + page_sql(page_index, page_limit))


@api("music", "Show one playlist with all of its songs.",
     "{playlist_id, title, created_at, songs: [{song_id, title, artist, genre, duration}]}",
     Param("playlist_id", "integer", "The playlist.", required=True))
def show_playlist(ctx: Ctx, playlist_id: int) -> dict[str, Any]:
    row = ctx.one("SELECT playlist_id, title, created_at FROM playlists WHERE playlist_id = ?", (playlist_id,),
                  "playlist")
    songs = ctx.rows(f"SELECT {', '.join('s.' + c for c in SONG.split(', '))} FROM playlist_songs x JOIN songs s "
                     "ON s.song_id = x.song_id WHERE x.playlist_id = ? ORDER BY s.song_id", (playlist_id,))
    return {**row, "songs": songs}


@api("music", "Create an empty playlist.", "{message, playlist_id}",
     Param("title", "string", "The playlist's title.", required=True))
def create_playlist(ctx: Ctx, title: str) -> dict[str, Any]:
    return {"message": "Playlist created.", "playlist_id": ctx.insert("playlists", title=title, created_at=ctx.now)}


def _song_in(ctx: Ctx, playlist_id: int, song_id: int) -> bool:
    ctx.one("SELECT playlist_id FROM playlists WHERE playlist_id = ?", (playlist_id,), "playlist")
    ctx.one("SELECT song_id FROM songs WHERE song_id = ?", (song_id,), "song")
    return bool(ctx.rows("SELECT 1 FROM playlist_songs WHERE playlist_id = ? AND song_id = ?", (playlist_id, song_id)))


@api("music", "Add a song to a playlist.", "{message}",
     Param("playlist_id", "integer", "The playlist.", required=True),
     Param("song_id", "integer", "The song.", required=True))
def add_song_to_playlist(ctx: Ctx, playlist_id: int, song_id: int) -> dict[str, Any]:
    if _song_in(ctx, playlist_id, song_id):
        raise AppError(409, "The song is already in the playlist.")
    ctx.insert("playlist_songs", playlist_id=playlist_id, song_id=song_id)
    return {"message": "Song added to the playlist."}


@api("music", "Remove a song from a playlist.", "{message}",
     Param("playlist_id", "integer", "The playlist.", required=True),
     Param("song_id", "integer", "The song.", required=True))
def remove_song_from_playlist(ctx: Ctx, playlist_id: int, song_id: int) -> dict[str, Any]:
    if not _song_in(ctx, playlist_id, song_id):
        raise AppError(404, "The song is not in the playlist.")
    ctx.conn.execute("DELETE FROM playlist_songs WHERE playlist_id = ? AND song_id = ?", (playlist_id, song_id))
    return {"message": "Song removed from the playlist."}


@api("music", "Delete a playlist.", "{message}", Param("playlist_id", "integer", "The playlist.", required=True))
def delete_playlist(ctx: Ctx, playlist_id: int) -> dict[str, Any]:
    ctx.one("SELECT playlist_id FROM playlists WHERE playlist_id = ?", (playlist_id,), "playlist")
    ctx.conn.execute("DELETE FROM playlist_songs WHERE playlist_id = ?", (playlist_id,))
    ctx.conn.execute("DELETE FROM playlists WHERE playlist_id = ?", (playlist_id,))
    return {"message": "Playlist deleted."}


# ---------------------------------------------------------------- notes


def _tags(text: str) -> list[str]:
    return [t for t in text.split(",") if t]


def _note_row(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "tags": _tags(row["tags"])}


def _tag_text(tags: Any) -> str:
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",")]
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise AppError(422, "tags must be a list of strings.")
    return ",".join(t.strip().lower() for t in tags if t.strip())


@api("notes", "List notes, most recently updated first (without their content).",
     "[{note_id, title, tags, updated_at}]",
     Param("query", "string", "Part of a title."), Param("tag", "string", "Only notes with this tag."), paged=True)
def show_notes(ctx: Ctx, query: str | None, tag: str | None, page_index: int, page_limit: int
               ) -> list[dict[str, Any]]:
    sql = ("SELECT note_id, title, tags, updated_at FROM notes WHERE (? IS NULL OR lower(title) LIKE ?) AND "
           "(? IS NULL OR ',' || tags || ',' LIKE ?) ORDER BY updated_at DESC, note_id DESC")
    args = (query, like(query), tag, f"%,{(tag or '').lower()},%")
    return [_note_row(r) for r in ctx.rows(sql + page_sql(page_index, page_limit), args)]


@api("notes", "Show one note with its content.", "{note_id, title, content, tags, created_at, updated_at}",
     Param("note_id", "integer", "The note.", required=True))
def show_note(ctx: Ctx, note_id: int) -> dict[str, Any]:
    return _note_row(ctx.one("SELECT note_id, title, content, tags, created_at, updated_at FROM notes "
                             "WHERE note_id = ?", (note_id,), "note"))


@api("notes", "Create a note.", "{message, note_id}", Param("title", "string", "The title.", required=True),
     Param("content", "string", "The text.", required=True), Param("tags", "list", "Tags (strings).", default=[]))
def create_note(ctx: Ctx, title: str, content: str, tags: Any) -> dict[str, Any]:
    note_id = ctx.insert("notes", title=title, content=content, tags=_tag_text(tags), created_at=ctx.now,
                         updated_at=ctx.now)
    return {"message": "Note created.", "note_id": note_id}


@api("notes", "Change a note; only the fields given change.", "{message}",
     Param("note_id", "integer", "The note.", required=True), Param("title", "string", "New title."),
     Param("content", "string", "New text (replaces the old)."), Param("tags", "list", "New tags (replace the old)."))
def update_note(ctx: Ctx, note_id: int, title: str | None, content: str | None, tags: Any) -> dict[str, Any]:
    show_note(ctx, note_id)
    changes = {"title": title, "content": content, "tags": None if tags is None else _tag_text(tags)}
    changes = {k: v for k, v in changes.items() if v is not None}
    if not changes:
        raise AppError(422, "Give at least one field to change.")
    for key, value in {**changes, "updated_at": ctx.now}.items():
        ctx.conn.execute(f"UPDATE notes SET {key} = ? WHERE note_id = ?", (value, note_id))
    return {"message": "Note updated."}


@api("notes", "Delete a note.", "{message}", Param("note_id", "integer", "The note.", required=True))
def delete_note(ctx: Ctx, note_id: int) -> dict[str, Any]:
    show_note(ctx, note_id)
    ctx.conn.execute("DELETE FROM notes WHERE note_id = ?", (note_id,))
    return {"message": "Note deleted."}


# ---------------------------------------------------------------- file_system

PATH_RE = re.compile(r"^~(/[A-Za-z0-9._ -]+)+$")


def clean_path(path: str, what: str = "path") -> str:
    path = path.rstrip("/") if path not in ("~", "~/") else "~"
    if path != "~" and not PATH_RE.match(path):
        raise AppError(422, f"Invalid {what} {path!r}: use paths like ~/documents/notes.txt.")
    return path


def _file(ctx: Ctx, file_path: str) -> dict[str, Any]:
    return ctx.one("SELECT path AS file_path, content, created_at, updated_at FROM files WHERE path = ?",
                   (clean_path(file_path, "file_path"),), "file at that path")


@api("file_system", "List what a directory holds (files and sub-directories), by name.",
     "[{path, name, type}] (type is file or directory)",
     Param("directory_path", "string", "e.g. ~/documents", required=True), paged=True)
def show_directory(ctx: Ctx, directory_path: str, page_index: int, page_limit: int) -> list[dict[str, Any]]:
    base = clean_path(directory_path, "directory_path")
    entries: dict[str, str] = {}
    for (path,) in ctx.conn.execute("SELECT path FROM files WHERE path LIKE ?", (base + "/%",)):
        rest = path[len(base) + 1:]
        name, _, deeper = rest.partition("/")
        entries[name] = "directory" if deeper else entries.get(name, "file")
    if not entries and base != "~":
        raise AppError(404, f"No directory {base!r}.")
    names = sorted(entries)[page_index * page_limit:(page_index + 1) * page_limit]
    return [{"path": f"{base}/{n}", "name": n, "type": entries[n]} for n in names]


@api("file_system", "Show a file with its content.", "{file_path, content, created_at, updated_at}",
     Param("file_path", "string", "e.g. ~/documents/notes.txt", required=True))
def show_file(ctx: Ctx, file_path: str) -> dict[str, Any]:
    return _file(ctx, file_path)


@api("file_system", "Create a file (its directories need not exist).", "{message}",
     Param("file_path", "string", "e.g. ~/documents/notes.txt", required=True),
     Param("content", "string", "The text.", default=""))
def create_file(ctx: Ctx, file_path: str, content: str) -> dict[str, Any]:
    path = clean_path(file_path, "file_path")
    if ctx.rows("SELECT 1 FROM files WHERE path = ?", (path,)):
        raise AppError(409, f"A file already exists at {path!r}.")
    ctx.insert("files", path=path, content=content, created_at=ctx.now, updated_at=ctx.now)
    return {"message": "File created."}


@api("file_system", "Delete a file.", "{message}",
     Param("file_path", "string", "e.g. ~/documents/notes.txt", required=True))
def delete_file(ctx: Ctx, file_path: str) -> dict[str, Any]:
    row = _file(ctx, file_path)
    ctx.conn.execute("DELETE FROM files WHERE path = ?", (row["file_path"],))
    return {"message": "File deleted."}


@api("file_system", "Move or rename a file.", "{message}",
     Param("source_file_path", "string", "Where the file is now.", required=True),
     Param("destination_file_path", "string", "Its new path, file name included.", required=True))
def move_file(ctx: Ctx, source_file_path: str, destination_file_path: str) -> dict[str, Any]:
    row = _file(ctx, source_file_path)
    target = clean_path(destination_file_path, "destination_file_path")
    if ctx.rows("SELECT 1 FROM files WHERE path = ?", (target,)):
        raise AppError(409, f"A file already exists at {target!r}.")
    ctx.conn.execute("UPDATE files SET path = ?, updated_at = ? WHERE path = ?", (target, ctx.now, row["file_path"]))
    return {"message": "File moved."}


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
            if values["page_index"] < 0:
                raise AppError(422, "page_index must be 0 or more.")
            if not 1 <= values["page_limit"] <= MAX_PAGE_LIMIT:
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
