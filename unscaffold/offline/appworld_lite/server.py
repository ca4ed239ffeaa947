"""The world's server: one trial's world database stays in the trial folder, outside the workspace, and the
student reaches it only through API calls on `.apps/world.sock`, as AppWorld keeps its database behind its
API server. It speaks the AppWorld bridge's protocol (one JSON line per call; `appworld_real/bridge.py`),
so the one client `apis.py` serves both worlds. Every request is treated as hostile: bounded in size, bad
input answered with an error, never a crash, and one server holds one trial's world only.

Try the apps by hand: `python -m unscaffold.offline.appworld_lite.server DIR` serves a demo world to DIR
until Ctrl-C; meanwhile `cd DIR && python3 -c "from apis import apis; print(apis.supervisor.show_profile())"`."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from unscaffold.benchmarks.appworld_real.bridge import bind, serve_connections

from . import apps
from .apis import SOCKET_FILE, STATE_DIR
from .world import World, demo_world, install_client

DB_FILE = "world.db"
MAX_WORLD_BYTES = 64 << 20  # the host's disk is not the student's: writes past this fail with a 507
POLL_S = 5.0  # stop() wakes the loop at once; this only bounds a missed wake-up


class WorldServer:
    """One world on one socket, served by one thread. `stop` (also on leaving `with`) waits for the call
    in progress and removes the socket, so the world is final and unreachable afterwards."""

    def __init__(self, db: Path, socket_path: Path) -> None:
        self.db, self.socket_path = Path(db), Path(socket_path)
        self._running = threading.Event()
        self._thread: threading.Thread | None = None
        self._dir_fd: int | None = None
        self._wake: tuple[int, int] | None = None

    def start(self) -> WorldServer:
        # The folder is held by descriptor: whatever the student later puts at its path, stop() cleans up here.
        self._dir_fd = os.open(self.socket_path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        server = bind(str(self.socket_path))
        os.chmod(self.socket_path.name, 0o666, dir_fd=self._dir_fd)  # the sandbox's user may be another uid
        self._wake = os.pipe()
        self._running.set()
        self._thread = threading.Thread(target=self._serve, args=(server,), daemon=True,
                                        name=f"world server {self.socket_path}")
        self._thread.start()
        return self

    def _serve(self, server: Any) -> None:
        assert self._wake is not None
        with server:
            serve_connections(server, self.handle, self._running.is_set, POLL_S, self._wake[0])

    def stop(self) -> None:
        """Idempotent; safe after a failed start."""
        self._running.clear()
        if self._wake is not None:
            os.write(self._wake[1], b"x")
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._wake is not None:
            for fd in self._wake:
                os.close(fd)
            self._wake = None
        if self._dir_fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.socket_path.name, dir_fd=self._dir_fd)
            os.close(self._dir_fd)
            self._dir_fd = None

    def __enter__(self) -> WorldServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """One API call as one transaction; the reply carries the result as a Python literal (as the bridge's)
        and whether it is a page of a list, for the client's call log."""
        if request.get("op") != "call":
            return {"ok": False, "error": error(400, f"Unknown op {str(request.get('op'))[:40]!r}: this world "
                                                     "answers API calls only.")}
        app, api, arguments = request.get("app"), request.get("api"), request.get("arguments") or {}
        if not (isinstance(app, str) and isinstance(api, str) and isinstance(arguments, dict)):
            return {"ok": False, "error": error(400, "A call names its app and API as text and passes its "
                                                     "arguments as an object.")}
        conn = apps.connect(str(self.db))
        try:
            page_size = conn.execute("PRAGMA page_size").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {MAX_WORLD_BYTES // page_size}")
            result = apps.call(conn, app, api, arguments)
            return {"ok": True, "value": repr(result), "paged": apps.find(app, api).paged}
        except apps.AppError as e:
            return {"ok": False, "error": str(e)}
        except Exception as e:  # past MAX_WORLD_BYTES sqlite reports the database full; else an apps bug
            full = isinstance(e, sqlite3.Error) and getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
            return {"ok": False, "error": error(507 if full else 500, f"{type(e).__name__}: {e}")}
        finally:
            conn.close()


def error(status: int, message: str) -> str:
    return str(apps.AppError(status, message))


def serve(db: Path, workspace: Path) -> WorldServer:
    """A server (not started) for the world in `db`, reachable from `workspace` as `.apps/world.sock`."""
    return WorldServer(db, Path(workspace) / STATE_DIR / SOCKET_FILE)


@contextlib.contextmanager
def served(world: World, workspace: Path, world_dir: Path | None = None) -> Iterator[Path]:
    """`world` served to a workspace with the client installed, for as long as the block
    lasts; yields the database, kept in `world_dir` (else a temporary folder removed afterwards)."""
    install_client(Path(workspace))
    folder = Path(world_dir) if world_dir else Path(tempfile.mkdtemp(prefix="appworld-lite-"))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        world.write(folder / DB_FILE)
        with serve(folder / DB_FILE, workspace):
            yield folder / DB_FILE
    finally:
        if world_dir is None:
            shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a demo app world to a folder until Ctrl-C.")
    parser.add_argument("workspace", type=Path)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill` cleans up as Ctrl-C does
    with served(demo_world(), args.workspace):
        print(f"serving a demo world at {args.workspace / STATE_DIR / SOCKET_FILE}; Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
