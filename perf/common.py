"""What every perf script shares: a command line of a few numbers and `--json`, the JSON print and the
layout of the plain one. The
scripts run as modules from the repository root (`.venv/bin/python -m perf.NAME`), so they import this."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from typing import Any


def command_line(doc: str, **numbers: float) -> argparse.ArgumentParser:
    """A parser described by the script's first doc line: `--NAME` for each number (its default and type given
    here; underscores become dashes) and `--json`; the script adds any option that needs help text."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    for name, default in numbers.items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    return parser


def printed_as_json(figures: Any, as_json: bool) -> bool:
    """Print the figures as JSON where `--json` asked for it, and say so; the script prints its lines otherwise."""
    if as_json:
        print(json.dumps(figures, indent=2))
    return as_json


def print_block(headline: str, details: Iterable[str]) -> None:
    """A figure's line, then its breakdown indented under it: the layout every script's plain print keeps."""
    print(headline)
    for line in details:
        print("  " + line)
