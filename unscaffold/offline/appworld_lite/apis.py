"""The apps of an app world, from Python: `from apis import apis`, then `apis.<app>.<api>(**arguments)`.

Standard library only: this file is copied into each trial's workspace as `apis.py`. It reaches the world
through the Unix socket `.apps/world.sock` beside it (or in the working directory), one JSON line per call:
for appworld_lite a server on the host holds the world's database, for real AppWorld a bridge process runs
AppWorld in its own Python. The world itself is never in the workspace. Either way the student writes the
same code, and every call is appended to `.apps/calls.jsonl`, which the h* checks read ("were all pages
read?", "was every changed entity read back?")."""

from __future__ import annotations

import ast
import json
import os
import socket
from pathlib import Path
from typing import Any

STATE_DIR = ".apps"
CALL_LOG = "calls.jsonl"
SOCKET_FILE = "world.sock"
DEFAULT_PAGE_LIMIT = 5
# Real AppWorld list APIs that return everything at once (the bridge cannot read the docs' paging flags;
# appworld_lite's server says in each reply whether it was a page).
UNPAGED = {("supervisor", "show_account_passwords"), ("supervisor", "show_addresses"),
           ("supervisor", "show_payment_cards"), ("supervisor", "show_profile")}
ID_SUFFIXES = ("_id", "_path")


class ApiError(Exception):
    """An API call failed: the message says why (status code and reason)."""


def api_kind(app: str, api: str) -> str:
    """read, login, submit or write: by name, so the same rule holds for appworld_lite and real AppWorld."""
    if app == "api_docs" or api.startswith(("show_", "search_", "get_", "list_")):
        return "read"
    if api in ("login", "logout"):
        return "login"
    if app == "supervisor" and api == "complete_task":
        return "submit"
    return "write"


def entity_keys(values: Any) -> dict[str, Any]:
    """The id-like fields of a call's arguments or result (`*_id`, `*_path`): what a read-back must name."""
    if not isinstance(values, dict):
        return {}
    return {k: v for k, v in values.items() if k.endswith(ID_SUFFIXES) and isinstance(v, (int, str))}


def find_state_dir() -> Path:
    candidates = [os.environ.get("APPS_STATE_DIR"), Path(__file__).resolve().parent / STATE_DIR,
                  Path.cwd() / STATE_DIR]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    raise ApiError(f"No app world here: the {STATE_DIR}/ folder beside apis.py is missing.")


def socket_address(path: Path) -> tuple[str, int | None]:
    """Unix socket paths are limited to about 100 bytes: reach a long one through its folder's descriptor."""
    if len(str(path)) < 100:
        return str(path), None
    fd = os.open(path.parent, os.O_RDONLY)
    return f"/proc/self/fd/{fd}/{path.name}", fd


def literal(value: Any) -> bool:
    try:
        return ast.literal_eval(repr(value)) == value
    except (ValueError, SyntaxError, RecursionError):
        return False


class SocketTransport:
    """Each call goes over a Unix socket to the world's server, which runs it in the task's world."""

    def __init__(self, socket_path: Path, timeout_s: float = 600.0) -> None:
        self.socket_path, self.timeout_s = socket_path, timeout_s

    def request(self, payload: dict[str, Any]) -> dict[str, Any]:
        address, fd = socket_address(self.socket_path)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(self.timeout_s)
                sock.connect(address)
                sock.sendall(json.dumps(payload).encode() + b"\n")
                data = b""
                while not data.endswith(b"\n"):
                    chunk = sock.recv(1 << 16)
                    if not chunk:
                        break
                    data += chunk
        except OSError as e:
            raise ApiError(f"The app world is not reachable ({e}).") from None
        finally:
            if fd is not None:
                os.close(fd)
        if not data:
            raise ApiError("The app world closed the connection without an answer.")
        return json.loads(data)

    def call(self, app: str, api: str, arguments: dict[str, Any]) -> tuple[Any, bool]:
        """The call's result, and whether it was one page of a list."""
        if not (app.isidentifier() and api.isidentifier()):
            raise ApiError(f"Invalid API name apis.{app}.{api}.")
        bad = [k for k, v in arguments.items() if not (k.isidentifier() and literal(v))]
        if bad:
            raise ApiError(f"Arguments must be plain values (str, int, float, bool, None, list, dict): {bad}.")
        reply = self.request({"op": "call", "app": app, "api": api, "arguments": arguments})
        if not reply.get("ok"):
            raise ApiError(reply.get("error") or "The call failed.")
        text = reply.get("value", "")
        try:
            result = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            result = text
        paged = reply.get("paged")
        if paged is None:
            paged = isinstance(result, list) and api.startswith(("show_", "search_")) and (app, api) not in UNPAGED
        return result, bool(paged)


def open_transport(state_dir: Path) -> SocketTransport:
    if (state_dir / SOCKET_FILE).exists():
        return SocketTransport(state_dir / SOCKET_FILE)
    raise ApiError(f"No app world in {state_dir}: {SOCKET_FILE} is missing (the world's server is not running).")


class App:
    def __init__(self, apis: Apis, name: str) -> None:
        self._apis, self._name = apis, name

    def __getattr__(self, api: str) -> Any:
        if api.startswith("__"):
            raise AttributeError(api)

        def call(*args: Any, **arguments: Any) -> Any:
            if args:
                raise ApiError(f"apis.{self._name}.{api} takes its arguments by name, e.g. "
                               f"apis.{self._name}.{api}(access_token=...).")
            return self._apis.call(self._name, api, arguments)

        call.__name__ = api
        return call

    def __getitem__(self, api: str) -> Any:
        return getattr(self, api)

    def __repr__(self) -> str:
        return f"<app {self._name}: see apis.api_docs.show_api_descriptions(app_name={self._name!r})>"


class Apis:
    """`apis.<app>.<api>(**arguments)`; `apis[app]` works too."""

    def __init__(self, state_dir: Path | str | None = None) -> None:
        self._state_dir = Path(state_dir) if state_dir else None
        self._transport: SocketTransport | None = None

    @property
    def state_dir(self) -> Path:
        if self._state_dir is None:
            self._state_dir = find_state_dir()
        return self._state_dir

    def _open(self) -> SocketTransport:
        if self._transport is None:
            self._transport = open_transport(self.state_dir)
        return self._transport

    def __getattr__(self, app: str) -> App:
        if app.startswith("_"):
            raise AttributeError(app)
        return App(self, app)

    def __getitem__(self, app: str) -> App:
        return App(self, app)

    def call(self, app: str, api: str, arguments: dict[str, Any]) -> Any:
        transport = self._open()
        try:
            result, paged = transport.call(app, api, arguments)
        except ApiError as e:
            self._log(app, api, arguments, None, str(e), False)
            raise
        self._log(app, api, arguments, result, None, paged)
        return result

    def _log(self, app: str, api: str, arguments: dict[str, Any], result: Any, error: str | None,
             paged: bool) -> None:
        entry: dict[str, Any] = {
            "app": app, "api": api, "kind": api_kind(app, api),
            "args": {k: v for k, v in arguments.items() if k not in ("access_token", "password") and literal(v)},
            "ok": error is None,
        }
        if error is not None:
            entry["error"] = error[:300]
        if paged:
            entry["paged"] = True
            entry["page_index"] = arguments.get("page_index", 0)
            entry["page_limit"] = arguments.get("page_limit", DEFAULT_PAGE_LIMIT)
        if isinstance(result, list):
            entry["count"] = len(result)
        if entity_keys(result):
            entry["result"] = entity_keys(result)
        try:
            with open(self.state_dir / CALL_LOG, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry, sort_keys=True) + "\n")
        except OSError:
            pass  # the log serves training-time checks; a read-only world must still answer


apis = Apis()
