"""Command-line options made from a pydantic settings model, so a setting is declared and documented once.

A field with `json_schema_extra={"flag": "--name"}` becomes that option, its description the help, its
default the default; nested models (agent, sandbox settings) contribute theirs. Values come from the
flags given, else from `--config FILE.toml` (the model's own shape), else the model's defaults."""

from __future__ import annotations

import inspect
import tomllib
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import click
import typer
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from unscaffold.errors import InputError

CONFIG_FLAG = "--config"


class ModelOption:
    """One option: the field's dotted path in the model and its flag."""

    def __init__(self, path: str, flag: str, field: FieldInfo) -> None:
        self.path, self.flag, self.field = path, flag, field
        self.param = path.replace(".", "__")

    def annotation(self) -> Any:
        """What the command line parses: lists come as comma-separated text; every option may be absent
        (the config file or the model default fills it)."""
        kind = self.field.annotation
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if typing.get_origin(kind) in (typing.Union, types.UnionType) and len(args) == 1:
            kind = args[0]
        if typing.get_origin(kind) in (list, typing.Literal):  # the model checks the value: one-line errors
            kind = str
        return kind | None

    def parameter(self) -> inspect.Parameter:
        default = None if self.field.default is PydanticUndefined else self.field.default
        option = typer.Option(self.flag, help=self.field.description, show_default=default is not None)
        return inspect.Parameter(self.param, inspect.Parameter.KEYWORD_ONLY, default=default,
                                 annotation=Annotated[self.annotation(), option])


def model_options(model: type[BaseModel], prefix: str = "") -> list[ModelOption]:
    options = []
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            options += model_options(kind, f"{prefix}{name}.")
            continue
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if "flag" in extra:
            options.append(ModelOption(f"{prefix}{name}", str(extra["flag"]), field))
    return options


def _set(tree: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for key in parents:
        node = tree.get(key)
        tree[key] = node = dict(node) if isinstance(node, dict) else {}
        tree = node
    tree[leaf] = value


def read_config_file(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(str(path), None, "file not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InputError(str(path), None, f"invalid TOML: {e}") from None


def build_settings(model: type[BaseModel], ctx: click.Context, given: dict[str, Any], fixed: dict[str, Any],
                   config_file: Path | None) -> BaseModel:
    """The model from the config file, the flags given on the command line (which win) and `fixed` values
    (e.g. positional arguments). A bad value names its flag, or the config file and its key."""
    options = model_options(model)
    from_file = read_config_file(config_file) if config_file else {}
    data = dict(from_file)
    from_flags: dict[str, str] = {}
    for option in options:
        source = ctx.get_parameter_source(option.param)
        if source is not None and source.name != "DEFAULT":
            _set(data, option.path, given[option.param])
            from_flags[option.path] = option.flag
    data.update(fixed)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        error = e.errors()[0]
        path = ".".join(str(part) for part in error["loc"])
        if path in from_flags:
            where = from_flags[path]
        elif config_file and path in _paths(from_file):
            where = f"{config_file}: {path}"
        else:  # e.g. a required setting given nowhere
            where = next((o.flag for o in options if o.path == path), path)
        raise InputError(where, None, error["msg"]) from None


def _paths(tree: dict[str, Any], prefix: str = "") -> set[str]:
    out = set()
    for key, value in tree.items():
        out.add(f"{prefix}{key}")
        if isinstance(value, dict):
            out |= _paths(value, f"{prefix}{key}.")
    return out


def command_from_model(model: type[BaseModel], leading: list[inspect.Parameter],
                       body: Callable[..., None]) -> Callable[..., None]:
    """A function typer can turn into a command: `leading` parameters (arguments, `ctx`), one option per
    flagged field of `model`, and `--config`; `body(ctx, config_file, given)` receives the values."""
    config_option = inspect.Parameter(
        "config_file", inspect.Parameter.KEYWORD_ONLY, default=None,
        annotation=Annotated[Path | None, typer.Option(CONFIG_FLAG, help="A TOML file of these settings (the "
                                                       "flags given here win).")])
    params = [*leading, *(o.parameter() for o in model_options(model)), config_option]

    def command(**values: Any) -> None:
        body(values)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = body.__doc__
    command.__name__ = body.__name__
    return command
