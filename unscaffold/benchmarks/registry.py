"""Suite names to classes; imported lazily so one suite's dependencies never slow another."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from unscaffold.benchmarks.base import Suite
from unscaffold.errors import InputError

SUITES: dict[str, str] = {
    "harbor": "unscaffold.benchmarks.harbor.suite:HarborSuite",
    "spreadsheet": "unscaffold.benchmarks.spreadsheet.suite:SpreadsheetSuite",
    "retrosynthesis": "unscaffold.benchmarks.retrosynthesis.suite:RetrosynthesisSuite",
    "appworld_lite": "unscaffold.offline.appworld_lite.suite:AppWorldLiteSuite",
    "appworld": "unscaffold.benchmarks.appworld_real.suite:AppWorldSuite",
}

REAL_DATA_SUITES = ("spreadsheet", "retrosynthesis", "harbor", "appworld")


def suite_folder(name: str) -> Path:
    """The folder a suite's parts live in (`benchmarks/<folder>/`), found without importing its suite module."""
    if name not in SUITES:
        raise InputError("SUITE", None, f"unknown suite {name!r}; known: {', '.join(sorted(SUITES))}")
    package = SUITES[name].partition(":")[0].rpartition(".")[0]
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None, package
    return Path(spec.origin).resolve().parent


def load_suite(name: str, data: Path | None = None, split_file: Path | None = None) -> Suite:
    """The suite over `data`; with `split_file`, its splits are the file's (checked against the data)."""
    if name not in SUITES:
        raise InputError("SUITE", None, f"unknown suite {name!r}; known: {', '.join(sorted(SUITES))}")
    module, _, cls = SUITES[name].partition(":")
    suite: Suite = getattr(importlib.import_module(module), cls)(data)
    if split_file is not None:
        if name not in REAL_DATA_SUITES:
            raise InputError("--split-file", None, f"suite {name!r} generates its own tasks and splits; split "
                             f"files are for real data ({', '.join(REAL_DATA_SUITES)})")
        suite.use_split_file(split_file)
    return suite
