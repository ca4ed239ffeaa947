"""What the bank's tools share beyond chem.py: reading their one JSON argument."""

from __future__ import annotations

import json
from typing import Any

BAD_ARGUMENT = object()  # what json_argument returns once it has printed the usage line


def json_argument(argv: list[str], usage: str) -> Any:
    """The script's one JSON argument; BAD_ARGUMENT, after printing `usage`, when it is missing or not JSON."""
    try:
        return json.loads(argv[1])
    except (IndexError, json.JSONDecodeError):
        print(usage)
        return BAD_ARGUMENT
