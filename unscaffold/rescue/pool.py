"""A sibling pool: a frozen set of h* banks, each a variant of a parent that repairs a few root causes.

The pool file is TOML, described by `PoolFile` (the one place its format is defined). A sibling names
its bank folder directly (`bank`, what harness evolution writes), or is an edit of another bank
(`edit`: the components it keeps from `edit.source` plus skills or memory files it adds), which
`materialise` writes out as an ordinary bank folder that `unscaffold run --harness PATH` accepts."""

from __future__ import annotations

import hashlib
import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, model_validator

from unscaffold.errors import InputError
from unscaffold.iojson import load_toml_model, resolve_inside
from unscaffold.knowledge.bank import NAME, load_bank
from unscaffold.strict import Strict
from unscaffold.suites import entries, find

BASE = "base"  # the parent name of a sibling evolved straight from the base harness
COMPONENT_KINDS = ("tools", "checks", "skills", "memory")
KIND_PREFIX = {"tools": "tool", "checks": "check", "skills": "skill", "memory": "memory"}


class AddedFile(Strict):
    """A skill or memory file the variant adds (a path relative to the pool file)."""

    kind: str = Field(pattern=r"^(skill|memory)$")
    name: str = Field(pattern=NAME)
    path: str
    summary: str = Field(min_length=1)


class Edit(Strict):
    """A variant written as an edit of another bank: keep these components, add these files."""

    source: str = Field(description="`hstar` (the suite's bank) or a bank folder relative to the pool file")
    keep: list[str] = Field(description="component ids of the source to keep, e.g. tool:write_cells, skill:verify")
    add: list[AddedFile] = Field(default_factory=list)
    description: str = Field("", description="the variant's manifest description")


class Sibling(Strict):
    name: str = Field(pattern=NAME)
    parent: str = Field(description=f"`{BASE}` or another sibling's name")
    repairs: list[str] = Field(min_length=1, description="the root causes this variant repairs (2-3 in the recipe)")
    bank: str | None = Field(None, description="a bank folder, relative to the pool file")
    edit: Edit | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Sibling:
        if (self.bank is None) == (self.edit is None):
            raise ValueError("give exactly one of `bank` and `edit`")
        return self


class PoolFile(Strict):
    """`pool.toml`: `name`, `suite` (where the file lies outside a suite folder), `base` (`minimal` or a bank
    folder) and `[[siblings]]`.

    Each sibling: `name`, `parent`, `repairs` and either `bank = "PATH"` or an `[siblings.edit]` table
    (`source`, `keep`, `[[siblings.edit.add]]` with `kind`, `name`, `path`, `summary`)."""

    name: str = Field(pattern=NAME)
    suite: str | None = Field(None, description="the suite it is for; default: the suite whose folder declares "
                              "this file as its pool (so a copied suite folder's pool is the copy's)")
    base: str = Field("minimal", description="the harness rollouts start under; evaluation always uses it")
    siblings: list[Sibling] = Field(min_length=1)


class Pool(BaseModel):
    """A loaded pool: the file, where it lies, and each sibling's bank folder once materialised."""

    path: Path
    spec: PoolFile
    suite: str = Field(description="the suite it is for: the file's `suite`, else the folder that declares it")
    banks: dict[str, Path] = Field(default_factory=dict)
    hstar: Path | None = Field(None, description="the suite's h* bank (`source = \"hstar\"`), where the caller "
                               "has the suite loaded over its data; else it is looked up by the suite's name")

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.spec.siblings]

    def sibling(self, name: str) -> Sibling:
        return next(s for s in self.spec.siblings if s.name == name)


def shipped_pool(suite: str) -> Path:
    """The pool a suite's folder declares (`pool` in its suite.toml)."""
    path = find(suite, "--pool").pool
    if path is None or not path.is_file():
        known = [e.name for e in entries() if e.pool is not None and e.pool.is_file()]
        raise InputError("--pool", None, f"no pool ships for suite {suite!r} (shipped: {', '.join(known)}); "
                         "pass --pool PATH")
    return path


def load_pool(path: Path) -> Pool:
    source = str(path)
    spec = load_toml_model(Path(path), PoolFile)
    names = [s.name for s in spec.siblings]
    for i, s in enumerate(spec.siblings):
        if s.name in names[:i]:
            raise InputError(source, f"siblings.{i}.name", f"duplicate name {s.name!r}")
        if s.parent != BASE and s.parent not in names:
            raise InputError(source, f"siblings.{i}.parent", f"unknown parent {s.parent!r} (use {BASE!r} or a "
                             "sibling's name)")
    resolved = Path(path).resolve()
    suite = spec.suite or next((e.name for e in entries() if e.pool is not None and e.pool.resolve() == resolved),
                               None)
    if suite is None:
        raise InputError(source, "suite", "missing: this pool lies in no suite folder, so it must name its suite")
    return Pool(path=resolved, spec=spec, suite=suite)


def toml_value(value: Any) -> str:
    """One-line TOML for JSON-like data (JSON strings are valid TOML basic strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def dump_toml(table: dict[str, Any]) -> str:
    return "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in table.items() if v is not None)


def source_bank(pool: Pool, source: str, field: str) -> Path:
    if source == "hstar":
        # the bank of the suite as loaded (train() sets it), else the one its folder declares
        bank = pool.hstar if pool.hstar is not None else find(pool.suite, str(pool.path), "suite").bank
        if bank is None:
            raise InputError(str(pool.path), field, f"suite {pool.suite!r} ships no h* bank")
        return bank
    return (pool.path.parent / source).resolve()


def edited_manifest(pool: Pool, sibling: Sibling, index: int) -> tuple[Path, dict[str, Any]]:
    """The source bank and the variant's manifest: the kept components plus the added files."""
    assert sibling.edit is not None
    field = f"siblings.{index}.edit"
    src = source_bank(pool, sibling.edit.source, f"{field}.source")
    raw = tomllib.loads((src / "manifest.toml").read_text(encoding="utf-8"))
    available = {f"{KIND_PREFIX[k]}:{c['name']}" for k in COMPONENT_KINDS for c in raw.get(k, [])}
    for j, cid in enumerate(sibling.edit.keep):
        if cid not in available:
            raise InputError(str(pool.path), f"{field}.keep.{j}", f"{cid!r} is not a component of {src}")
    keep = set(sibling.edit.keep)
    manifest: dict[str, Any] = {"name": sibling.name,
                                "description": sibling.edit.description or f"{raw.get('name')} variant: "
                                + ", ".join(sibling.repairs)}
    for kind in COMPONENT_KINDS:
        manifest[kind] = [c for c in raw.get(kind, []) if f"{KIND_PREFIX[kind]}:{c['name']}" in keep]
    for check in manifest["checks"]:  # a kept check whose remedy tool was dropped keeps its rule, not the remedy
        rule = check.get("transcript_rule") or {}
        if "remedy" in rule and f"tool:{rule['remedy']['tool']}" not in keep:
            check["transcript_rule"] = {k: v for k, v in rule.items() if k != "remedy"}
    for j, added in enumerate(sibling.edit.add):
        resolve_inside(pool.path.parent, added.path, str(pool.path), f"{field}.add.{j}.path", "the pool folder")
        kind = "skills" if added.kind == "skill" else "memory"
        manifest[kind].append({"name": added.name, "path": f"added/{Path(added.path).name}", "summary": added.summary})
    return src, manifest


def fingerprint(pool: Pool) -> str:
    """Changes when the pool file or any file it builds from changes, so a stale build is never reused."""
    h = hashlib.sha256(pool.path.read_bytes())
    for s in pool.spec.siblings:
        if s.edit is not None:
            src = source_bank(pool, s.edit.source, "")
            for f in sorted(p for p in src.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
                h.update(str(f.relative_to(src)).encode() + f.read_bytes())
            for a in s.edit.add:
                h.update((pool.path.parent / a.path).read_bytes())
    return h.hexdigest()[:16]


def materialise(pool: Pool, out: Path) -> Pool:
    """Write every edited sibling as a bank folder under `out/<name>/` and check that each loads.

    A bank folder named by `bank` is used where it lies. Idempotent: a build with the same fingerprint
    is reused."""
    out = Path(out)
    stamp = out / ".fingerprint"
    current = fingerprint(pool)
    fresh = (stamp.is_file() and stamp.read_text() == current
             and all((out / s.name).is_dir() for s in pool.spec.siblings if s.edit is not None))
    banks: dict[str, Path] = {}
    for i, s in enumerate(pool.spec.siblings):
        if s.bank is not None:
            banks[s.name] = (pool.path.parent / s.bank).resolve()
        else:
            banks[s.name] = (out / s.name).resolve()
            if not fresh:
                src, manifest = edited_manifest(pool, s, i)
                tmp = out / f".{s.name}.tmp"
                shutil.rmtree(tmp, ignore_errors=True)
                shutil.copytree(src, tmp, ignore=shutil.ignore_patterns("__pycache__", "manifest.toml"))
                for a in s.edit.add if s.edit else []:
                    (tmp / "added").mkdir(exist_ok=True)
                    shutil.copyfile(pool.path.parent / a.path, tmp / "added" / Path(a.path).name)
                (tmp / "manifest.toml").write_text(f"# written from {pool.path} (sibling {s.name})\n"
                                                   + dump_toml(manifest), encoding="utf-8")
                shutil.rmtree(banks[s.name], ignore_errors=True)
                tmp.rename(banks[s.name])
        try:
            load_bank(banks[s.name])
        except InputError as e:
            raise InputError(str(pool.path), f"siblings.{i}", f"sibling {s.name!r} is not a valid bank: {e}") from None
    if not fresh:
        out.mkdir(parents=True, exist_ok=True)
        stamp.write_text(current)
    return pool.model_copy(update={"banks": banks})
