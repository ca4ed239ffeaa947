"""Moving files between the driver and worker nodes that share no file system.

Inputs (the suite's `--data`, K, an h* bank folder, replay files) go out once as one archive that each
node unpacks into a cache named by its digest; a finished trial's folder comes back as an archive the
driver unpacks into the run folder."""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import io
import os
import tarfile
import tempfile
from pathlib import Path
from typing import TypeVar

from unscaffold.run.models import RunConfig
from unscaffold.specs import HarnessSpec, ModelSpec, ReviewerSpec

CACHE = Path(tempfile.gettempdir()) / "unscaffold-ray"


def pack(entries: dict[str, Path], exclude: frozenset[str] = frozenset()) -> bytes:
    """A gzip tar holding each path under its name (`name` for a file, `name/...` for a folder). The same files
    give the same bytes (no time in the gzip header), so a node's cache serves every run over them."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=1, mtime=0) as packed, \
            tarfile.open(fileobj=packed, mode="w") as tar:
        for name, path in sorted(entries.items()):
            tar.add(path, arcname=name, filter=lambda info: None if info.name in exclude else info)
    return buffer.getvalue()


def unpack(archive: bytes, into: Path) -> None:
    """Safe extraction: no absolute paths, no links leaving `into`, no devices, owner not kept."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(into, filter="data")


def pack_folder(folder: Path, exclude: frozenset[str] = frozenset()) -> bytes:
    """A folder's contents (not the folder itself), leaving out the top-level names in `exclude`."""
    return pack({child.name: child for child in folder.iterdir() if child.name not in exclude})


def spec_file(spec: ModelSpec | ReviewerSpec | None) -> str | None:
    """The file a student or reviewer spec names for trials to read: a replay's (a cascade's inner one's too);
    hf: weights stay where they are."""
    if isinstance(spec, ReviewerSpec):
        return spec_file(spec.inner or spec.model)
    return spec.target if spec is not None and spec.kind == "replay" else None


S = TypeVar("S", ModelSpec, ReviewerSpec)


def with_file(spec: S, path: str) -> S:
    """`spec` reading its file (see `spec_file`) from `path`."""
    if isinstance(spec, ReviewerSpec):
        part = "inner" if spec.inner is not None else "model"
        return spec.model_copy(update={part: with_file(getattr(spec, part), path)})
    return spec.model_copy(update={"target": path})


def inputs(config: RunConfig) -> dict[str, Path]:
    """The driver's files that trials read: name -> path (only those that exist here)."""
    found: dict[str, Path] = {}
    if config.data is not None:
        found["data"] = config.data
    if config.knowledge is not None:
        found["knowledge"] = config.knowledge
    if config.harness.kind == "bank" and config.harness.path:
        found["harness"] = Path(config.harness.path)
    for field in ("student", "reviewer"):
        path = spec_file(getattr(config, field))
        if path:
            found[field] = Path(path)
    return {name: path.resolve() for name, path in found.items() if path.exists()}


def rebased(config: RunConfig, root: Path, names: set[str]) -> RunConfig:
    """The config a worker runs with: every shipped input read from `root/NAME` instead."""
    update: dict[str, object] = {}
    for name in ("data", "knowledge"):
        if name in names:
            update[name] = root / name
    if "harness" in names:
        update["harness"] = HarnessSpec(kind="bank", path=str(root / "harness"))
    for field in ("student", "reviewer"):
        spec = getattr(config, field)
        if spec_file(spec) and field in names:
            update[field] = with_file(spec, str(root / field))
    return config.model_copy(update=update)


def digest(archive: bytes) -> str:
    return hashlib.sha256(archive).hexdigest()[:20]


def unpack_cached(archive: bytes, key: str) -> Path:
    """Unpack once per node: one worker unpacks aside and renames into place, the others wait for it."""
    target = CACHE / key
    if target.is_dir():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.is_dir():
            staging = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=CACHE))
            unpack(archive, staging)
            os.rename(staging, target)
    return target
