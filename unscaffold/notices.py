"""One line on the terminal the first time something is retried for a new cause, so a run that waits on a
server that is not there says so at once instead of only in its event log."""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Callable

_seen: set[str] = set()
_lock = threading.Lock()
log = logging.getLogger(__name__)


def _to_stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


sink: Callable[[str], None] = _to_stderr


def cause_key(cause: str, *ids: str) -> str:
    """The same cause in other words: trial and task ids and numbers (ports aside, times, counts) dropped."""
    for text in ids:
        if text:
            cause = cause.replace(text, "<id>")
    return re.sub(r"\d+(\.\d+)?", "#", " ".join(cause.split()))[:300]


def note_retry(cause: str, what: str, wait_s: float, *ids: str) -> bool:
    """Say (once per cause) what failed, what is retried and after how long; True when it was said."""
    key = cause_key(cause, *ids)
    with _lock:
        if key in _seen:
            log.debug("retrying again: %s: %s in %.0f s", " ".join(cause.split())[:300], what, wait_s)
            return False
        _seen.add(key)
    flat = " ".join(cause.split())
    sink(f"retrying: {flat[:300]}: {what} in {wait_s:.0f} s (said once per cause)")
    return True


def forget() -> None:
    """Start again (a new command in the same process, e.g. tests)."""
    with _lock:
        _seen.clear()
