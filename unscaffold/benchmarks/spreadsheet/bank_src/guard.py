"""What the before-finish checks share: the task's input/output pairs and a one-time warning memory."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from unscaffold.benchmarks.spreadsheet.bank_src.common import Problem, open_book, task_fields

WARNED = Path("/tmp/.spreadsheet-checks-warned")


def pairs() -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The task fields and its (input, output) paths; no fields (no task file) means nothing to check."""
    fields = task_fields() or {}
    return fields, list(zip(fields.get("inputs", []), fields.get("outputs", []), strict=False))


def opened(files: list[tuple[str, str]], inputs: bool = True) -> Iterator[tuple[str, str, Any, Any]]:
    """(input, output, input book or None, output book) for each pair whose workbooks open; an output not
    written or not readable is the output check's to report, so the other checks pass over it."""
    for source, target in files:
        try:
            yield source, target, open_book(source) if inputs else None, open_book(target)
        except Problem:
            continue


def first_time(message: str) -> bool:
    """True the first time a warning is seen in this sandbox: a warning blocks once, then lets go."""
    digest = hashlib.sha256(message.encode()).hexdigest()[:16]
    seen = WARNED.read_text().split() if WARNED.is_file() else []
    if digest in seen:
        return False
    try:
        WARNED.write_text("\n".join([*seen, digest]) + "\n")
    except OSError:
        return False
    return True
