"""How a settings field says it is a command-line option, and the options several commands share (declared
once here, so `--tasks` or `--data` means the same everywhere). `unscaffold/cli_options.py` reads them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field


def flag(name: str, *, repeat: bool = False, text: bool = False, show_default: bool = True) -> dict[str, Any]:
    """`json_schema_extra` of a field that is the option `name` (see cli_options for the keys)."""
    extra: dict[str, Any] = {"flag": name}
    if repeat:
        extra["repeat"] = True
    if text:
        extra["text"] = True
    if not show_default:
        extra["show_default"] = False
    return extra


def comma_list(value: Any) -> Any:
    """`a,b` as ["a", "b"]; an empty text as None (no subset given)."""
    return ([t for t in value.split(",") if t] or None) if isinstance(value, str) else value


def comma_list_kept_empty(value: Any) -> Any:
    """`a,b` as ["a", "b"]; an empty text as [] (where an empty list means something, e.g. a whole split)."""
    return [t for t in value.split(",") if t] if isinstance(value, str) else value


TaskIds = Annotated[list[str] | None, BeforeValidator(comma_list),
                    Field(description="Comma-separated task ids.", json_schema_extra=flag("--tasks"))]
DataFolder = Annotated[Path | None, Field(description="Real data for the suite.", json_schema_extra=flag("--data"))]
SplitFile = Annotated[Path | None, Field(
    description="Real data's splits: JSON {\"train\": [...], \"validation\": [...], \"test\": [...]} of task ids, "
    "or the text form (see splits/README.md); test ids are refused where tasks feed training, evolution or a "
    "router.", json_schema_extra=flag("--split-file"))]
Concurrency = Annotated[int, Field(ge=1, description="Trials at once.", json_schema_extra=flag("--concurrency"))]
Trials = Annotated[int, Field(ge=1, description="Trials per task.", json_schema_extra=flag("--trials"))]
