"""Building a suite by its name: the registry (`unscaffold/suites.py`) finds its folder, this makes the suite."""

from __future__ import annotations

from pathlib import Path

from unscaffold.benchmarks.base import Suite
from unscaffold.errors import InputError
from unscaffold.suites import SUITE_FILE, entries, find


def load_suite(name: str, data: Path | None = None, split_file: Path | None = None) -> Suite:
    """The suite over `data`; with `split_file`, its splits are the file's (checked against the data)."""
    entry = find(name)
    cls = entry.suite_class()
    if not issubclass(cls, Suite):
        raise InputError(str(entry.folder / SUITE_FILE), "suite", f"{cls.__name__} is not a Suite")
    suite = cls(data)
    if split_file is not None:
        if not entry.user_data:
            own = ", ".join(e.name for e in entries() if e.user_data)
            raise InputError("--split-file", None, f"suite {entry.name!r} generates its own tasks and splits; "
                             f"split files are for real data ({own})")
        suite.use_split_file(split_file)
    return suite
