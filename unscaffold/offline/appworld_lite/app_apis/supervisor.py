"""The supervisor (profile, passwords, complete_task), api_docs, and each app's login."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..appkit import APP_DESCRIPTIONS, APPS, Api, AppError, Ctx, Param, api


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
