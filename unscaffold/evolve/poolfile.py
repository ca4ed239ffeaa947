"""The frozen pool file that rescue training reads (`pool.toml`), in the rescue pool format: `name`,
`suite`, `base` and one `[[siblings]]` entry per child with `name`, `parent`, `repairs` (the causes it
repairs) and `bank` (its folder, relative to the pool file)."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from unscaffold.iojson import write_text_atomic
from unscaffold.knowledge.bank import NAME

BASE = "base"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PoolSibling(Strict):
    name: str = Field(pattern=NAME)
    parent: str = Field(description=f"`{BASE}` or another sibling's name")
    repairs: list[str] = Field(min_length=1)
    bank: str = Field(description="a bank folder, relative to the pool file")


class EvolvedPool(Strict):
    name: str = Field(pattern=NAME)
    suite: str
    base: str = Field(description="the harness rollouts start under: the base bank's folder")
    siblings: list[PoolSibling] = Field(min_length=1)


def pool_toml(pool: EvolvedPool, header: str) -> str:
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"{k} = {json.dumps(getattr(pool, k))}" for k in ("name", "suite", "base")]
    for s in pool.siblings:
        lines += ["", "[[siblings]]", f"name = {json.dumps(s.name)}", f"parent = {json.dumps(s.parent)}",
                  f"repairs = [{', '.join(json.dumps(c) for c in s.repairs)}]", f"bank = {json.dumps(s.bank)}"]
    return "\n".join(lines) + "\n"


def write_pool(path: Path, pool: EvolvedPool, header: str) -> None:
    write_text_atomic(path, pool_toml(pool, header))
