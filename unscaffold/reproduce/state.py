"""What has run: each finished stage's digest (its command, the digests of the stages it reads and the
content of the files outside the plan it reads), kept in the plan folder's `state.json`."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

from pydantic import BaseModel, Field

from unscaffold.iojson import load_model, write_json_atomic
from unscaffold.reproduce.plan import Stage

STATE = "state.json"


class Finished(BaseModel):
    digest: str
    seconds: float = Field(ge=0)
    run_id: str = Field("", description="new each time the stage runs: a stage that reads it reruns after it "
                        "reran, even with the same digest (empty in older states: the digest stands in)")

    @classmethod
    def now(cls, digest: str, seconds: float) -> Finished:
        return cls(digest=digest, seconds=seconds, run_id=uuid.uuid4().hex)


class State(BaseModel):
    stages: dict[str, Finished] = Field(default_factory=dict)

    @classmethod
    def load(cls, folder: Path) -> State:
        path = folder / STATE
        return load_model(path, cls) if path.exists() else cls()

    def save(self, folder: Path) -> None:
        write_json_atomic(folder / STATE, self.model_dump(mode="json"))


def content_digest(path: Path) -> str:
    """Every file under `path` (or `path` itself): names and bytes, in a fixed order; absent is its own value."""
    h = hashlib.sha256()
    if not path.exists():
        h.update(b"absent")
        return h.hexdigest()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        h.update(str(f.relative_to(path) if f != path else f.name).encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()


def stage_digest(stage: Stage, state: State, folder: Path) -> str:
    """Changes when the command, the output or a file it reads changes, or a stage it reads has run again; the
    plan folder's own place does not count, so a moved folder keeps its state."""
    upstream = {name: (state.stages[name].run_id or state.stages[name].digest) if name in state.stages else None
                for name in stage.after}
    reads = {r: content_digest((folder / r) if not Path(r).is_absolute() else Path(r)) for r in stage.reads}
    key = {"argv": stage.argv, "out": stage.out, "stdout": stage.stdout, "after": upstream, "reads": reads}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
