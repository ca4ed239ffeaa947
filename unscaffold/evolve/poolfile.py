"""The frozen pool file that rescue training reads (`pool.toml`), in the rescue pool format: `name`,
`suite`, `base` and one `[[siblings]]` entry per child with `name`, `parent`, `repairs` (the causes it
repairs) and `bank` (its folder, relative to the pool file)."""

from __future__ import annotations

import json
from pathlib import Path

from unscaffold.iojson import write_text_atomic
from unscaffold.rescue.pool import BASE, PoolFile, Sibling  # the one pool format: rescue training reads it

__all__ = ["BASE", "PoolFile", "Sibling", "pool_toml", "write_pool"]


def pool_toml(pool: PoolFile, header: str) -> str:
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"{k} = {json.dumps(getattr(pool, k))}" for k in ("name", "suite", "base")]
    for s in pool.siblings:
        lines += ["", "[[siblings]]", f"name = {json.dumps(s.name)}", f"parent = {json.dumps(s.parent)}",
                  f"repairs = [{', '.join(json.dumps(c) for c in s.repairs)}]", f"bank = {json.dumps(s.bank)}"]
    return "\n".join(lines) + "\n"


def write_pool(path: Path, pool: PoolFile, header: str) -> None:
    write_text_atomic(path, pool_toml(pool, header))
