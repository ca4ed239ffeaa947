"""Suite names to classes; imported lazily so one suite's dependencies never slow another."""

from __future__ import annotations

import importlib
from pathlib import Path

from unscaffold.benchmarks.base import Suite
from unscaffold.errors import InputError

SUITES: dict[str, str] = {
    "harbor": "unscaffold.benchmarks.harbor.suite:HarborSuite",
    "spreadsheet": "unscaffold.benchmarks.spreadsheet.suite:SpreadsheetSuite",
    "retrosynthesis": "unscaffold.benchmarks.retrosynthesis.suite:RetrosynthesisSuite",
    "appworld_lite": "unscaffold.benchmarks.appworld_lite.suite:AppWorldLiteSuite",
    "appworld": "unscaffold.benchmarks.appworld_real.suite:AppWorldSuite",
}


def load_suite(name: str, data: Path | None = None) -> Suite:
    if name not in SUITES:
        raise InputError("SUITE", None, f"unknown suite {name!r}; known: {', '.join(sorted(SUITES))}")
    module, _, cls = SUITES[name].partition(":")
    return getattr(importlib.import_module(module), cls)(data)
