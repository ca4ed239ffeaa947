"""The AppWorld bridge: holds one task's world open and serves it over a Unix socket.

It runs under AppWorld's own Python (the `appworld` package needs pydantic 1, so it never shares an
environment with unscaffold) and imports nothing from unscaffold: the standard library and `appworld`
only. The student's `apis.py` sends it one JSON line per API call; the suite asks it to evaluate the
task with AppWorld's own evaluator when the student is done.

    python bridge.py serve --task-id 82e2fac_1 --experiment NAME --socket WORKSPACE/.apps/world.sock

On start it prints one JSON line (`{"ready": true, ...}` or `{"ready": false, "error": ...}`) to stdout.
It exits on `close`, when idle too long, or when the process that started it is gone.

The wire protocol (one JSON object per connection and line each way, bounded and never fatal on bad input:
`bind`, `read_request`, `answer`, `serve_connections`) is shared with appworld_lite's world server, so one
client speaks to both."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import select
import socket
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

FAILED = "Execution failed"  # how AppWorld's `execute` reports an exception in the executed code
POLL_S = 5.0
MAX_REQUEST_BYTES = 1 << 20  # one call with its arguments; the sender may be hostile, so a longer line is refused
READ_TIMEOUT_S = 60.0  # for the one request line of a connection


class BadRequest(Exception):
    """A request that is not one JSON object on one line of at most MAX_REQUEST_BYTES."""


def plain(value: Any) -> Any:
    """AppWorld's task fields may be pydantic models or dicts: JSON-ready either way."""
    if hasattr(value, "dict"):
        value = value.dict()
    return json.loads(json.dumps(value, default=str))


def open_world(task_id: str, experiment: str, max_interactions: int) -> Any:
    from appworld import AppWorld

    try:
        return AppWorld(task_id=task_id, experiment_name=experiment, max_interactions=max_interactions)
    except TypeError:  # an AppWorld version without that option
        return AppWorld(task_id=task_id, experiment_name=experiment)


def call_code(app: str, api: str, arguments: dict[str, Any]) -> str:
    """The code AppWorld runs for one call: the result printed as a Python literal the client can parse."""
    if not (app.isidentifier() and api.isidentifier() and all(k.isidentifier() for k in arguments)):
        raise ValueError("invalid app, API or argument name")
    return f"print(repr(apis.{app}.{api}(**{arguments!r})))"


def evaluate(world: Any, task_id: str, experiment: str) -> dict[str, Any]:
    """AppWorld's own verdict: its state-based tests for the task (collateral damage included)."""
    try:
        tracker = world.evaluate()
    except Exception:
        if hasattr(world, "save"):
            world.save()
        from appworld.evaluator import evaluate_task

        tracker = evaluate_task(task_id=task_id, experiment_name=experiment, suppress_errors=True)
    report = tracker.to_dict() if hasattr(tracker, "to_dict") else {}
    passes = report.get("passes", [])
    failures = report.get("failures", report.get("fails", []))
    return {
        "ok": True,
        "success": bool(getattr(tracker, "success", report.get("success", False))),
        "num_tests": report.get("num_tests", len(passes) + len(failures)),
        "passes": len(passes),
        "failures": plain(failures)[:20],
        "completed": bool(world.task_completed()),
    }


def handle(world: Any, request: dict[str, Any], task_id: str, experiment: str) -> dict[str, Any]:
    op = request.get("op")
    try:
        if op == "call":
            output = world.execute(call_code(request["app"], request["api"], request.get("arguments") or {}))
            output = str(output).strip()
            if output.startswith(FAILED) or "Traceback (most recent call last)" in output:
                return {"ok": False, "error": output}
            return {"ok": True, "value": output}
        if op == "evaluate":
            return evaluate(world, task_id, experiment)
        if op == "ping":
            return {"ok": True, "completed": bool(world.task_completed())}
        if op == "close":
            return {"ok": True, "closing": True}
        return {"ok": False, "error": f"unknown op {op!r}"}
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"}


def bind(path: str) -> socket.socket:
    """Bind the socket; a path too long for AF_UNIX is reached through its folder's descriptor."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    folder, name = os.path.split(os.path.abspath(path))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    if len(path) < 100:
        server.bind(path)
    else:
        fd = os.open(folder, os.O_RDONLY)
        try:
            server.bind(f"/proc/self/fd/{fd}/{name}")
        finally:
            os.close(fd)
    server.listen(8)
    return server


def read_request(conn: socket.socket, keep_going: Callable[[], bool] = lambda: True, wake_fd: int | None = None,
                 limit: int = MAX_REQUEST_BYTES, timeout_s: float = READ_TIMEOUT_S) -> dict[str, Any]:
    """One JSON object on one line. Reads at most `limit` bytes, gives up after `timeout_s` or once
    `keep_going()` turns false (checked when `wake_fd` turns readable, and twice a second), and raises
    BadRequest with the reason for anything else."""
    deadline = time.monotonic() + timeout_s
    waiting: list[socket.socket | int] = [conn] if wake_fd is None else [conn, wake_fd]
    data = b""
    while not data.endswith(b"\n"):
        if not keep_going():
            raise BadRequest("the server is stopping")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise BadRequest(f"no complete request line within {timeout_s:.0f} s")
        if conn not in select.select(waiting, [], [], min(remaining, 0.5))[0]:
            continue
        chunk = conn.recv(min(1 << 16, limit + 1 - len(data)))
        if not chunk:
            break
        data += chunk
        if len(data) > limit:
            raise BadRequest(f"the request is longer than {limit} bytes")
    try:
        request = json.loads(data.decode("utf-8")) if data.strip() else None
    except (ValueError, RecursionError) as e:  # RecursionError: JSON nested too deep
        raise BadRequest(f"not JSON ({type(e).__name__})") from None
    if not isinstance(request, dict):
        raise BadRequest("expected one JSON object on one line")
    return request


def answer(conn: socket.socket, handle: Callable[[dict[str, Any]], dict[str, Any]],
           keep_going: Callable[[], bool] = lambda: True, wake_fd: int | None = None) -> dict[str, Any]:
    """Read one request, reply with `handle`'s answer (or the reason the request was refused); return the reply."""
    try:
        reply = handle(read_request(conn, keep_going, wake_fd))
    except BadRequest as e:
        reply = {"ok": False, "error": f"Bad request: {e}."}
    except OSError as e:
        return {"ok": False, "error": f"connection failed: {e}"}
    except Exception as e:  # a handler's bug must cost one call, never the server
        reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps(reply).encode() + b"\n")
    return reply


def serve_connections(server: socket.socket, handle: Callable[[dict[str, Any]], dict[str, Any]],
                      keep_going: Callable[[], bool], poll_s: float = POLL_S, wake_fd: int | None = None) -> None:
    """Answer one connection at a time until `keep_going()` is false (checked every `poll_s`, and at once
    when `wake_fd` turns readable) or a reply says `closing`. Nothing a client sends ends the loop otherwise."""
    waiting: list[socket.socket | int] = [server] if wake_fd is None else [server, wake_fd]
    server.setblocking(False)
    while keep_going():
        if server not in select.select(waiting, [], [], poll_s)[0]:
            continue
        try:
            conn, _ = server.accept()
        except (BlockingIOError, InterruptedError):  # the client gave up in between
            continue
        with conn:
            conn.settimeout(READ_TIMEOUT_S)  # a client that never reads its reply cannot hold the server
            reply = answer(conn, handle, keep_going, wake_fd)
        if reply.get("closing"):
            break


def serve(args: argparse.Namespace) -> int:
    parent = os.getppid()
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # AppWorld may print while loading
            world = open_world(args.task_id, args.experiment, args.max_interactions)
        server = bind(args.socket)
    except Exception as e:
        print(json.dumps({"ready": False, "error": f"{type(e).__name__}: {e}"}), flush=True)
        return 1
    task = getattr(world, "task", None)
    print(json.dumps({"ready": True, "task_id": args.task_id,
                      "instruction": getattr(task, "instruction", None)}), flush=True)
    last_call = [time.monotonic()]

    def reply(request: dict[str, Any]) -> dict[str, Any]:
        last_call[0] = time.monotonic()
        with contextlib.redirect_stdout(sys.stderr):
            return handle(world, request, args.task_id, args.experiment)

    try:
        serve_connections(server, reply, lambda: time.monotonic() - last_call[0] < args.idle_timeout
                          and os.getppid() == parent)
    finally:
        server.close()
        with contextlib.suppress(OSError):
            os.unlink(args.socket)
        with contextlib.suppress(Exception):
            world.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--task-id", required=True)
    s.add_argument("--experiment", required=True)
    s.add_argument("--socket", required=True)
    s.add_argument("--idle-timeout", type=float, default=3600.0)
    s.add_argument("--max-interactions", type=int, default=100_000)
    args = parser.parse_args(argv)
    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
