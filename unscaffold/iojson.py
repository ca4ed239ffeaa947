"""Atomic file writes and validated reads: nothing half-written, errors name the file and field."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from unscaffold.errors import InputError
from unscaffold.llm.json_bounds import MAX_DEPTH, encodable, repair_value

M = TypeVar("M", bound=BaseModel)
REPAIR_DEPTH = 2 * MAX_DEPTH  # a record's own nesting (a trajectory's messages, their calls) plus arguments


def write_text_atomic(path: Path, text: str, durable: bool = True) -> None:
    """Write through a temporary file in the same folder, then rename: readers never see half a file.

    `durable=False` skips the fsync: still atomic if the process dies, not if the machine loses power.
    The temporary name is unique per process and thread, so concurrent writers never share one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        f = open(tmp, "w", encoding="utf-8")
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(tmp, "w", encoding="utf-8")
    try:
        with f:
            f.write(text)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def json_text(data: Any, indent: int | None = None) -> str:
    """`data` (a model or plain values) as JSON text that always encodes: a record must be written even
    when it holds what a model emitted (a lone surrogate, a structure nested too deep for the writers),
    so such a value is written repaired (U+FFFD for the surrogate, a note for the too-deep part)."""
    try:
        if isinstance(data, BaseModel):
            text = data.model_dump_json(indent=indent, exclude_none=True)
        else:
            text = json.dumps(data, indent=indent, ensure_ascii=False, default=str)
        if encodable(text):
            return text
    except (ValueError, RecursionError):  # pydantic's serializer raises ValueError for both
        pass
    plain: Any = data
    if isinstance(data, BaseModel):
        try:
            plain = data.model_dump(exclude_none=True)  # the model's own shape, unless it is too deep
        except (ValueError, RecursionError):
            plain = data
    return json.dumps(repair_value(plain, REPAIR_DEPTH), indent=indent, ensure_ascii=False, default=str)


def write_json_atomic(path: Path, data: Any, durable: bool = True) -> None:
    write_text_atomic(path, json_text(data, indent=2) + "\n", durable=durable)


def append_jsonl(path: Path, record: Any, durable: bool = False) -> None:
    """Append one line with a single O_APPEND write: a killed process leaves whole lines only.

    `durable=True` adds an fsync (power loss); logs written on every step skip it, since an fsync per
    line serialises concurrent trials on the file system's journal."""
    line = json_text(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        if durable:
            f.flush()
            os.fsync(f.fileno())


def read_input_text(path: Path, encoding: str = "utf-8") -> str:
    """A file the user named, as text; a missing or unreadable one is one line naming it."""
    try:
        return Path(path).read_text(encoding=encoding)
    except FileNotFoundError:
        raise InputError(str(path), None, "file not found") from None
    except OSError as e:
        raise InputError(str(path), None, f"cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise InputError(str(path), None, f"not {encoding} text: {e.reason}") from None


def read_json(path: Path) -> Any:
    path = Path(path)
    text = read_input_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(str(path), f"line {e.lineno} column {e.colno}", f"invalid JSON: {e.msg}") from None


def validation_error(source: str, err: ValidationError, prefix: str = "") -> InputError:
    """Turn pydantic's report into one line naming the first bad field."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    field = f"{prefix}.{loc}" if prefix and loc else (prefix or loc or None)
    return InputError(source, field, first["msg"])


def load_toml_model(path: Path, model: type[M], missing: str = "file not found") -> M:
    """A TOML file validated as `model`; any problem is one line naming the file (and the field)."""
    import tomllib

    source = str(path)
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(source, None, missing) from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(source, None, f"invalid TOML: {e}") from None
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        raise validation_error(source, e) from None


def load_model(path: Path, model: type[M]) -> M:
    data = read_json(path)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise validation_error(str(path), e) from None


def resolve_inside(root: Path, relative: str, source: str, field: str, what: str) -> Path:
    """Resolve a file named relative to `root` (a bank, K), refusing one that is absolute or leaves it."""
    if Path(relative).is_absolute():
        raise InputError(source, field, f"path {relative!r} must be relative to {what}")
    resolved = (root / relative).resolve()
    if not resolved.is_relative_to(Path(root).resolve()):
        raise InputError(source, field, f"path {relative!r} leaves {what}")
    if not resolved.is_file():
        raise InputError(source, field, f"file {relative!r} not found")
    return resolved
