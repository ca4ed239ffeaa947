"""`--executor`: which executor a run names and what each trial asks the scheduler for; read by the
executors and by preflight, so it depends on neither."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel

from unscaffold.errors import InputError, UnscaffoldError

FLAG = "--executor"
USAGE = "expected local, ray or ray:ADDRESS (e.g. ray:auto, ray://HOST:10001), optionally ?cpus=N&memory=SIZE"
INSTALL_RAY = "Ray is not installed here: install it with `pip install 'unscaffold[ray]'`"
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


class RunStopped(UnscaffoldError):
    """The run is stopping (Ctrl-C): the attempt was abandoned and its trial stays unfinished for resume."""


class ExecutorSpec(BaseModel):
    """`--executor`: the kind, the cluster address, and what each trial asks the scheduler for."""

    kind: Literal["local", "ray"]
    address: str | None = None
    cpus: float = 1.0
    memory_bytes: int | None = None


def _size(text: str) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", text.strip(), re.IGNORECASE)
    if not match:
        raise InputError(FLAG, "memory", f"{text!r} is not a size (e.g. 2G, 512M)")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def parse_executor(spec: str) -> ExecutorSpec:
    """`local`, `ray`, `ray:ADDRESS`, each optionally followed by `?cpus=N&memory=SIZE` (per trial)."""
    head, _, query = spec.partition("?")
    kind, sep, address = head.partition(":")
    if kind not in ("local", "ray") or (sep and (kind == "local" or not address)):
        raise InputError(FLAG, None, f"unknown executor {spec!r}; {USAGE}")
    parsed = ExecutorSpec(kind=kind, address=address or None)  # type: ignore[arg-type]
    for item in filter(None, query.split("&")):
        key, _, value = item.partition("=")
        if key == "cpus":
            try:
                parsed.cpus = float(value)
            except ValueError:
                raise InputError(FLAG, "cpus", f"{value!r} is not a number") from None
            if parsed.cpus < 0:
                raise InputError(FLAG, "cpus", "must be >= 0")
        elif key == "memory":
            parsed.memory_bytes = _size(value)
        else:
            raise InputError(FLAG, key, f"unknown option; {USAGE}")
    return parsed
