"""`--executor`: where trials run (local threads, a Ray instance or cluster) and what each trial asks the
scheduler for."""

from __future__ import annotations

import re
from typing import Literal, Self

from unscaffold.errors import InputError
from unscaffold.specs.base import Spec, closest_spelling, number, query

FLAG = "--executor"
USAGE = "expected local, ray or ray:ADDRESS (e.g. ray:auto, ray://HOST:10001), optionally ?cpus=N&memory=SIZE"
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


class ExecutorSpec(Spec):
    """The kind, the cluster address, and what each trial asks the scheduler for."""

    FLAG = FLAG
    kind: Literal["local", "ray"]
    address: str | None = None
    cpus: float = 1.0
    memory_bytes: int | None = None

    @classmethod
    def parse(cls, text: str, *, flag: str | None = None) -> Self:
        """`local`, `ray`, `ray:ADDRESS`, each optionally followed by `?cpus=N&memory=SIZE` (per trial)."""
        flag = flag or cls.FLAG
        head, _, given = text.partition("?")
        kind, sep, address = head.partition(":")
        if kind not in ("local", "ray") or (sep and (kind == "local" or not address)):
            hint = closest_spelling(head, ["ray"], ["local", "ray"])
            raise InputError(flag, None, f"unknown executor {text!r}; {USAGE}{hint}")
        cpus, memory = 1.0, None
        for item in filter(None, given.split("&")):
            key, _, value = item.partition("=")
            if key == "cpus":
                try:
                    cpus = float(value)
                except ValueError:
                    raise InputError(flag, "cpus", f"{value!r} is not a number") from None
                if cpus < 0:
                    raise InputError(flag, "cpus", "must be >= 0")
            elif key == "memory":
                memory = _size(value, flag)
            else:
                raise InputError(flag, key, f"unknown option; {USAGE}")
        return cls(kind=kind, address=address or None, cpus=cpus, memory_bytes=memory)

    def __str__(self) -> str:
        head = f"{self.kind}:{self.address}" if self.address else self.kind
        return head + query([("cpus", None if self.cpus == 1.0 else number(self.cpus)),
                             ("memory", None if self.memory_bytes is None else _size_text(self.memory_bytes))])


def _size(text: str, flag: str) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", text.strip(), re.IGNORECASE)
    if not match:
        raise InputError(flag, "memory", f"{text!r} is not a size (e.g. 2G, 512M)")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def _size_text(size: int) -> str:
    """A size in the largest unit that holds it whole: 2147483648 -> `2G`."""
    for unit, factor in sorted(_UNITS.items(), key=lambda item: -item[1]):
        if size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)
