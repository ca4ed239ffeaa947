"""Keeps the head and tail of a command's output while it streams, so 50 MB never sits in memory."""

from __future__ import annotations

import codecs

HEAD_CHARS = 5_000
TAIL_CHARS = 5_000


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
        return f"{head}\n[... {elided} characters elided ...]\n{tail}"
