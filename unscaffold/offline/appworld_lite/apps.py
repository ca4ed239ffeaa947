"""The apps of appworld_lite over one SQLite file: supervisor, api_docs, contacts, messages, payments, music,
notes and file_system.

It runs on the host only, never in the workspace: the world's server (`server.py`) answers the student's
calls with it, and the verifier runs the same code in-process to apply the gold changes, so the student
and the gold can never disagree about how an API behaves.

Conventions follow AppWorld: per-app `login(username, password)` returning an access token that every
other call of that app must pass explicitly; list APIs take `page_index` (from 0) and `page_limit`
(default 5, at most 20) and return an empty list past the end; errors carry an HTTP-like status.

This module is what the rest of the suite imports: the machinery is in `appkit.py`, each app in
`app_apis/<app>.py`; importing them here registers every API in `APPS`, in the order the docs list them."""

from __future__ import annotations

import importlib

from .appkit import (
    APP_DESCRIPTIONS,
    APPS,
    BOOKKEEPING_TABLES,
    DEFAULT_PAGE_LIMIT,
    MAX_PAGE_LIMIT,
    SCHEMA,
    Api,
    AppError,
    Ctx,
    Param,
    call,
    connect,
    find,
)

__all__ = ["APPS", "APP_DESCRIPTIONS", "BOOKKEEPING_TABLES", "DEFAULT_PAGE_LIMIT", "MAX_PAGE_LIMIT", "SCHEMA", "Api",
           "AppError", "Ctx", "Param", "call", "connect", "find"]

APP_MODULES = ("supervisor", "contacts", "messages", "payments", "music", "notes", "file_system")
for _module in APP_MODULES:  # supervisor first: it registers each app's login, listed before the app's APIs
    importlib.import_module(f"{__package__}.app_apis.{_module}")
