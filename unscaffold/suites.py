"""The suite registry: a suite is a folder that declares itself in a `suite.toml`, found by looking, not listed.

Built-in suites are the folders of `unscaffold/benchmarks/` and `unscaffold/offline/` that hold one; the
folders named in `UNSCAFFOLD_SUITE_PATH` (separated by `os.pathsep`, each holding suite folders) add more.
A suite folder is a Python package whose declaration names its parts relative to itself (the suite class,
the detectors module, the h* bank, K, the sibling pool, the sandbox libraries), so a copy of a folder under
another name is a suite of its own with no other edit. Nothing here imports a suite until one of its parts
is asked for (`benchmarks.load_suite` builds one), so one suite's dependencies never slow another, and the
layers that reach suites through this module (the behaviour detectors, the bank loader) import no suite.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from unscaffold.errors import InputError, did_you_mean
from unscaffold.iojson import load_toml_model

SUITE_FILE = "suite.toml"
SEARCH_PATH = "UNSCAFFOLD_SUITE_PATH"
PACKAGE = Path(__file__).resolve().parent
BUILT_IN = (("unscaffold.benchmarks", PACKAGE / "benchmarks"), ("unscaffold.offline", PACKAGE / "offline"))
CASES_FILE = "detector_cases.toml"  # beside a bank's manifest: the hand-written cases of its detectors
NAME = r"^[a-z][a-z0-9_]*$"

# A behaviour predicate: shows the behaviour in a trajectory's steps (a `behaviors.predicates.View`), with the
# detector's params. Each suite's detectors module holds `PREDICATES` and, where it has evidence forms, `EVIDENCE`.
Predicate = Callable[[Any, dict[str, Any]], bool]


class SuiteDeclaration(BaseModel):
    """What a suite folder's `suite.toml` says; every path and module is relative to the folder."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(None, pattern=NAME, description="the suite's name (default: the folder's name)")
    aliases: list[str] = Field(default_factory=list, description="other names that find the suite")
    description: str = Field(min_length=1, description="one line: what the suite's tasks are and how they score")
    suite: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
                       description="MODULE:CLASS, the `Suite` subclass (tasks, workspace, reference, scorer)")
    user_data: bool = Field(False, description="`--data` reads the user's own data, so split files apply")
    detectors: str | None = Field(None, pattern=r"^[A-Za-z_][\w.]*$", description="the module holding the "
                                  "behaviour predicates (`PREDICATES`, `EVIDENCE`) its bank's detectors name")
    bank: str | None = Field(None, description="the h* bank folder (`--harness hstar`); its detector cases "
                             f"are its {CASES_FILE}")
    k: str | None = Field(None, description="the compiled K folder (the default `--knowledge`)")
    bank_of: str | None = Field(None, description="another suite whose bank and K this one serves")
    pool: str | None = Field(None, description="the sibling pool file (`rescue train`, `--harness route:shipped`)")
    image: str | None = Field(None, description="the libraries its tasks import in the sandbox (pip format)")
    data_marks: list[str] = Field(default_factory=list, description="globs whose match in a --data folder (or a "
                                  "--data file's name) says this suite reads it (`split` guesses the suite so)")

    @field_validator("bank", "k", "pool", "image")
    @classmethod
    def _inside(cls, value: str | None) -> str | None:
        """A part of the folder: a relative path that stays inside it."""
        if value is not None and (Path(value).is_absolute() or ".." in Path(value).parts):
            raise ValueError(f"{value!r} must be a path inside the suite folder")
        return value

    @field_validator("aliases")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        bad = [a for a in value if not re.match(NAME, a)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a suite name (lower case, digits, _)")
        return value


class SuiteListing(BaseModel):
    """One suite as `unscaffold suites` lists it (`--json` prints a list of these)."""

    name: str
    aliases: list[str]
    folder: str
    built_in: bool
    own_data: bool
    parts: list[str]
    description: str


@dataclass(frozen=True)
class SuiteEntry:
    """A registered suite: its name, its folder and package, and its parts as paths."""

    name: str
    folder: Path
    package: str
    declaration: SuiteDeclaration
    bank: Path | None
    k: Path | None
    built_in: bool

    @property
    def description(self) -> str:
        return self.declaration.description

    @property
    def aliases(self) -> list[str]:
        return self.declaration.aliases

    @property
    def user_data(self) -> bool:
        return self.declaration.user_data

    @property
    def pool(self) -> Path | None:
        return self.folder / self.declaration.pool if self.declaration.pool else None

    @property
    def image(self) -> Path | None:
        return self.folder / self.declaration.image if self.declaration.image else None

    @property
    def cases(self) -> Path | None:
        """The detector cases of the bank it owns (a bank it serves from another suite is that suite's)."""
        return self.bank / CASES_FILE if self.bank is not None and self.declaration.bank else None

    def listing(self) -> SuiteListing:
        """What `unscaffold suites` shows of it: names, where it lives, which parts it ships."""
        parts = {"bank": self.bank, "k": self.k, "pool": self.pool, "detectors": self.declaration.detectors,
                 "image": self.image}
        return SuiteListing(name=self.name, aliases=self.aliases, folder=str(self.folder), built_in=self.built_in,
                            own_data=self.user_data, parts=[name for name, value in parts.items() if value],
                            description=self.description)

    def module(self, relative: str) -> ModuleType:
        """One of the suite's modules, by its name inside the folder."""
        if not self.built_in:
            _importable(self)
        return importlib.import_module(f"{self.package}.{relative}")

    def suite_class(self) -> type:
        """The class `suite` names (`benchmarks.load_suite` checks that it is a `Suite`)."""
        module, _, cls = self.declaration.suite.partition(":")
        out = getattr(self.module(module), cls, None)
        if not isinstance(out, type):
            raise InputError(str(self.folder / SUITE_FILE), "suite", f"{module} has no class {cls!r}")
        return out

    def detectors(self) -> ModuleType | None:
        return self.module(self.declaration.detectors) if self.declaration.detectors else None


def _importable(entry: SuiteEntry) -> None:
    """A suite from the search path is the package of its folder's name, imported from that folder; the
    folder's parent joins `sys.path` so that worker processes find its modules by name too. A name another
    module already has is refused."""
    parent = str(entry.folder.parent)
    if parent not in sys.path:
        sys.path.append(parent)
    module = sys.modules.get(entry.package)
    if module is None:
        spec = importlib.util.spec_from_file_location(entry.package, entry.folder / "__init__.py",
                                                      submodule_search_locations=[str(entry.folder)])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[entry.package] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[entry.package]
            raise
    where = Path(getattr(module, "__file__", None) or "").resolve().parent
    if where != entry.folder:
        raise InputError(str(entry.folder / SUITE_FILE), None, f"the package name {entry.package!r} is taken "
                         f"by {where}; rename the suite folder")


@dataclass(frozen=True)
class _Found:
    folder: Path
    package: str
    declaration: SuiteDeclaration
    built_in: bool

    @property
    def name(self) -> str:
        return self.declaration.name or self.folder.name


def _found(root: Path, package: str | None) -> list[_Found]:
    """The suite folders directly under `root` (package None: a search-path folder, imported by folder name)."""
    if not root.is_dir():
        raise InputError(SEARCH_PATH, None, f"{root} is not a folder")
    out = []
    for folder in sorted(p for p in root.iterdir() if (p / SUITE_FILE).is_file()):
        source = folder / SUITE_FILE
        declaration = load_toml_model(source, SuiteDeclaration)
        if not (folder / "__init__.py").is_file():
            raise InputError(str(source), None, "a suite folder is a Python package: add an __init__.py")
        if package is None and not folder.name.isidentifier():
            raise InputError(str(source), None, f"the folder name {folder.name!r} is not a Python package name")
        out.append(_Found(folder, f"{package}.{folder.name}" if package else folder.name, declaration,
                          package is not None))
    return out


def search_path() -> list[Path]:
    """The folders of suite folders beyond the built-in ones (`UNSCAFFOLD_SUITE_PATH`)."""
    return [Path(p) for p in os.environ.get(SEARCH_PATH, "").split(os.pathsep) if p]


@functools.cache
def _registry(extra: tuple[Path, ...]) -> dict[str, SuiteEntry]:
    """Every suite by its name and its aliases, built-in ones first."""
    found = [f for package, root in BUILT_IN for f in _found(root, package)]
    found += [f for root in extra for f in _found(root.resolve(), None)]
    by_name: dict[str, _Found] = {}
    for f in found:
        for n in (f.name, *f.declaration.aliases):
            if n in by_name:
                raise InputError(str(f.folder / SUITE_FILE), "name", f"suite name {n!r} is also "
                                 f"{by_name[n].folder}'s")
            by_name[n] = f
    out: dict[str, SuiteEntry] = {}
    for f in found:
        owner = f
        if f.declaration.bank_of is not None:
            if f.declaration.bank_of not in by_name:
                raise InputError(str(f.folder / SUITE_FILE), "bank_of", f"unknown suite {f.declaration.bank_of!r}")
            owner = by_name[f.declaration.bank_of]
        bank, k = owner.declaration.bank, owner.declaration.k
        entry = SuiteEntry(name=f.name, folder=f.folder, package=f.package, declaration=f.declaration,
                           built_in=f.built_in, bank=owner.folder / bank if bank else None,
                           k=owner.folder / k if k else None)
        out.update(dict.fromkeys((f.name, *f.declaration.aliases), entry))
    return out


def registry() -> dict[str, SuiteEntry]:
    """Every suite the search path gives now, by name and alias."""
    return _registry(tuple(search_path()))


def entries(*, built_in_only: bool = False) -> list[SuiteEntry]:
    """Each suite once, by name (`built_in_only`: without reading the search path)."""
    unique = {e.name: e for e in (_registry(()) if built_in_only else registry()).values()}
    return [unique[n] for n in sorted(unique)]


def names(*, built_in_only: bool = False) -> list[str]:
    return [e.name for e in entries(built_in_only=built_in_only)]


def find(name: str, source: str = "SUITE", field: str | None = None) -> SuiteEntry:
    """The suite of this name (or alias); an unknown one is one line naming the close ones and the known."""
    known = registry()
    if name in known:
        return known[name]
    raise InputError(source, field, f"unknown suite {name!r}; known: {', '.join(names())}{did_you_mean(name, known)}")


def suite_folder(name: str) -> Path:
    """The folder a suite's parts live in, found without importing its suite module."""
    return find(name).folder


def entry_of(cls: type) -> SuiteEntry | None:
    """The suite whose folder holds this class's module (None: a class outside every suite folder)."""
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    if path is None:
        return None
    here = Path(path).resolve()
    return next((e for e in entries() if here.is_relative_to(e.folder)), None)


@functools.cache
def _predicate_tables(extra: tuple[Path, ...]) -> tuple[dict[str, Predicate], dict[str, Predicate]]:
    tables: tuple[dict[str, Predicate], dict[str, Predicate]] = ({}, {})
    origins: tuple[dict[str, Path], dict[str, Path]] = ({}, {})
    for entry in sorted(entries(), key=lambda e: not e.built_in):  # a built-in suite's predicate first
        module = entry.detectors()
        if module is None or module.__file__ is None:
            continue
        path = Path(module.__file__)
        for field, out, origin in zip(("PREDICATES", "EVIDENCE"), tables, origins, strict=True):
            for name, predicate in getattr(module, field, {}).items():
                if name in out and origin[name].read_bytes() != path.read_bytes():
                    raise InputError(str(path), field, f"predicate {name!r} is also {origin[name]}'s, with other "
                                     "code; give it another name")
                out.setdefault(name, predicate)
                origin.setdefault(name, path)
    return tables


def predicates() -> dict[str, Predicate]:
    """Every behaviour predicate a bank's detector may name (`predicate = "..."`), from each suite's
    detectors module. A name two suites share is one predicate only where both modules are the same file
    (a copied suite)."""
    return _predicate_tables(tuple(search_path()))[0]


def evidence_predicates() -> dict[str, Predicate]:
    """The same behaviours judged from recorded evidence, where a suite gives an evidence form."""
    return _predicate_tables(tuple(search_path()))[1]


def reading(data: Path) -> list[SuiteEntry]:
    """The suites whose data marks `data` has (its files, or its own name where it is a file)."""
    data = Path(data)

    def marked(pattern: str) -> bool:
        return data.match(pattern) if data.is_file() else data.is_dir() and any(data.glob(pattern))

    return [e for e in entries() if any(marked(p) for p in e.declaration.data_marks)]


def suite_help() -> str:
    """The suite argument's help: the built-in suites (a search path adds its own)."""
    return f"Suite name: {', '.join(names(built_in_only=True))}, or a suite folder's on {SEARCH_PATH}."
