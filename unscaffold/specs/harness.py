"""`--harness`: minimal (h), hstar (the suite's own h* bank), a bank folder, or route:POOL (each task under
the sibling a router ranks first; POOL a pool.toml, or `shipped` for the suite's own pool)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import Field, model_validator

from unscaffold.errors import InputError
from unscaffold.specs.base import Spec, closest_spelling

ROUTE_PREFIX = "route:"
SHIPPED = "shipped"
USAGE = "expected minimal, hstar, a bank folder or route:POOL"


class HarnessSpec(Spec):
    """Which harness trials run under."""

    FLAG = "--harness"
    kind: Literal["minimal", "hstar", "bank", "route"]
    path: str | None = Field(None, description="bank: the bank folder; route: the pool.toml, or `shipped`")

    @model_validator(mode="after")
    def _path(self) -> Self:
        if (self.kind in ("bank", "route")) != bool(self.path):
            raise ValueError("a bank or route harness names its path, and no other kind one")
        return self

    @classmethod
    def parse(cls, text: str, *, flag: str | None = None) -> Self:
        if text in ("minimal", "hstar"):
            return cls(kind=text)  # one of the two
        if text.startswith(ROUTE_PREFIX):
            return cls(kind="route", path=text.removeprefix(ROUTE_PREFIX) or SHIPPED)
        if not text.strip():
            raise InputError(flag or cls.FLAG, None, f"no harness named; {USAGE}")
        hint = closest_spelling(text, ["route"], ["minimal", "hstar"])
        if hint and not Path(text).exists():  # a typo of a word, not a bank folder
            raise InputError(flag or cls.FLAG, None, f"unknown harness {text!r}; {USAGE}{hint}")
        return cls(kind="bank", path=text)

    def __str__(self) -> str:
        return {"bank": self.path, "route": f"{ROUTE_PREFIX}{self.path}"}.get(self.kind) or self.kind

    @property
    def uses_bank(self) -> bool:
        """Trials run under an h* bank (the suite's or a folder)."""
        return self.kind in ("hstar", "bank")
