"""Where the command line writes: one console for results (stdout), one for progress, warnings and log lines
(stderr), and the `unscaffold` loggers configured once, through rich, at the level `--verbose` / `--debug`
ask for.

Each console is made for the stream it writes to and remade when that stream changes (a new command
invocation, a test capturing output), so colour and width follow the stream as a fresh `Console()` would."""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

from rich.console import Console
from rich.logging import RichHandler

LOGGER = "unscaffold"  # every module logs under it: logging.getLogger(__name__)
DEBUG_ENV, VERBOSE_ENV = "UNSCAFFOLD_DEBUG", "UNSCAFFOLD_VERBOSE"
_made: dict[bool, tuple[TextIO, Console]] = {}


def _console(stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    made = _made.get(stderr)
    if made is None or made[0] is not stream:
        made = _made[stderr] = (stream, Console(stderr=stderr))
    return made[1]


def out_console() -> Console:
    """The console for a command's results: tables, summaries, the paths it wrote."""
    return _console(False)


def err_console() -> Console:
    """The console for what is not a result: progress bars, warnings, notes and log lines."""
    return _console(True)


def _env_on(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def start_invocation() -> None:
    """A command begins: consoles made afresh for its streams and environment, and logging at the level the
    environment asks for (`UNSCAFFOLD_DEBUG=1`, `UNSCAFFOLD_VERBOSE=1`); `--verbose` / `--debug` raise it."""
    _made.clear()
    set_level(logging.DEBUG if _env_on(DEBUG_ENV) else logging.INFO if _env_on(VERBOSE_ENV) else logging.WARNING,
              replace=True)


def set_level(level: int, replace: bool = False) -> None:
    """Log `unscaffold` records at `level` and above to stderr through rich. Without `replace` the level only
    rises in detail: `--debug --verbose` logs at debug, whichever flag is read first."""
    logger = logging.getLogger(LOGGER)
    if not replace and logger.level != logging.NOTSET and logger.level <= level:
        return
    for handler in [h for h in logger.handlers if isinstance(h, RichHandler)]:
        logger.removeHandler(handler)
    handler = RichHandler(console=err_console(), show_time=False, show_path=level <= logging.DEBUG, markup=False,
                          rich_tracebacks=False)
    handler.setLevel(level)
    logger.addHandler(handler)
    logger.setLevel(level)


def debugging() -> bool:
    """Whether `--debug` (or `UNSCAFFOLD_DEBUG=1`) is on: an internal error prints its traceback."""
    return logging.getLogger(LOGGER).level == logging.DEBUG


def end_invocation() -> None:
    """A command ended: its log handler removed and the level unset, so what runs next in this process (a
    library caller, the next test) logs as if no command had run."""
    logger = logging.getLogger(LOGGER)
    for handler in [h for h in logger.handlers if isinstance(h, RichHandler)]:
        logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)
    _made.clear()
