"""A command's output as it streams (bounded in memory) and as the student sees it (cut per suite).

The sandbox keeps at most `HEAD_CHARS` + `TAIL_CHARS` of a command's output: a memory bound only, far above
any observation. What the student sees is cut by `cut_output`, where the agent forms the observation, with
the suite's limit (the reference harness: 12,000 characters in the app world, nothing cut elsewhere)."""

from __future__ import annotations

import codecs

HEAD_CHARS = 1_000_000
TAIL_CHARS = 1_000_000


class OutputCollector:
    """Feed bytes as they arrive; `text()` gives the output with the middle elided past the limit."""

    def __init__(self, head_chars: int = HEAD_CHARS, tail_chars: int = TAIL_CHARS) -> None:
        self.head_chars, self.tail_chars = head_chars, tail_chars
        self._limit = head_chars + tail_chars
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._head = ""
        self._tail = ""
        self.total_chars = 0

    def feed(self, data: bytes, final: bool = False) -> None:
        text = self._decoder.decode(data, final=final)
        if not text:
            return
        self.total_chars += len(text)
        room = self._limit - len(self._head)
        if room > 0:
            self._head += text[:room]
            text = text[room:]
        if text:
            self._tail = (self._tail + text)[-self.tail_chars :]

    @property
    def elided_chars(self) -> int:
        return max(0, self.total_chars - self._limit)

    def text(self) -> str:
        self.feed(b"", final=True)
        if self.total_chars <= self._limit:
            return self._head
        head = self._head[: self.head_chars]
        # Characters kept in `_head` beyond the head part belong before the tail window.
        overflow = self._head[self.head_chars :]
        tail = (overflow + self._tail)[-self.tail_chars :]
        elided = self.total_chars - len(head) - len(tail)
        return head + elision_note(elided) + tail


def elision_note(elided: int) -> str:
    """The line that stands for the characters left out, in the collector's and the agent's cut alike."""
    return f"\n[... {elided} characters elided ...]\n"


def cut_output(text: str, limit: int | None, elided_before: int = 0) -> str:
    """`text` whole when it fits in `limit` characters (or no limit); else its first `limit // 2` and last
    `limit - limit // 2` characters around a note of how many were elided (the reference's head and tail).
    `elided_before`: characters the collector already left out of `text` (counted in the note, whose own
    line falls inside the cut)."""
    if limit is None or len(text) <= limit:
        return text
    head, tail = limit // 2, limit - limit // 2
    marker = len(elision_note(elided_before)) if elided_before else 0
    elided = len(text) - head - tail - marker + elided_before
    return text[:head] + elision_note(elided) + text[len(text) - tail:]
