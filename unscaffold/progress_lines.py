"""Progress for a log: where stderr is not a terminal a live bar prints nothing until it ends, so long
commands (training, trials of a local model) print a plain line now and then instead."""

from __future__ import annotations

import sys
import time
from typing import TextIO

EVERY_S = 30.0  # seconds between two lines, at most one line a step


def elapsed(seconds: float) -> str:
    minutes, s = divmod(int(seconds), 60)
    return f"{minutes}m{s:02d}s" if minutes else f"{s}s"


class ProgressLines:
    """`label done/total (elapsed) extra` on the first update, the last one, and at most every `every_s`."""

    def __init__(self, label: str, total: int | None = None, *, every_s: float = EVERY_S,
                 stream: TextIO | None = None) -> None:
        self.label, self.total, self.every_s = label, total, every_s
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.last: float | None = None

    def update(self, done: int, extra: str = "", *, total: int | None = None) -> None:
        self.total = total if total is not None else self.total
        now = time.monotonic()
        final = self.total is not None and done >= self.total
        if self.last is not None and not final and now - self.last < self.every_s:
            return
        self.last = now
        of = f"/{self.total}" if self.total is not None else ""
        self.stream.write(f"{self.label} {done}{of} ({elapsed(now - self.started)}){f' {extra}' if extra else ''}\n")
        self.stream.flush()
