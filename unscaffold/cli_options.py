"""Command-line options made from a pydantic settings model, so a setting is declared and documented once.

A field with `json_schema_extra={"flag": "--name"}` becomes that option, its description the help, its
default the default; nested models (agent, sandbox settings, a budget) contribute theirs. Values come
from the flags given, else from `--config FILE` (TOML or YAML, the model's own shape, optionally under a
table named after the command), else the model's defaults.

Other keys of `json_schema_extra` shape the option: `repeat` (a list given by repeating the flag; other
lists are comma-separated text), `text` (parsed by the model, not the command line: e.g. `auto|true|false`)
and `show_default: false` (a default that says nothing useful, such as a path on this machine)."""

from __future__ import annotations

import inspect
import logging
import re
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

from unscaffold.config_file import did_you_mean_key, read_config_file, unknown_key
from unscaffold.console import DEBUG_ENV, VERBOSE_ENV, set_level
from unscaffold.errors import InputError, did_you_mean
from unscaffold.preflight import NO_PREFLIGHT_HELP
from unscaffold.specs.base import Spec

log = logging.getLogger(__name__)
CONFIG_FLAG = "--config"
SETTINGS_MODEL = "settings_model"  # the attribute naming a generated command's model (tests walk the app by it)


def _extra(field: FieldInfo) -> dict[str, Any]:
    return field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}


def _nested_model(field: FieldInfo) -> type[BaseModel] | None:
    """A section of settings whose fields are options; a spec (`--student`, ...) is one option, as text."""
    kind = field.annotation
    return kind if isinstance(kind, type) and issubclass(kind, BaseModel) and not issubclass(kind, Spec) else None


class ModelOption:
    """One option: the field's dotted path in the model and its flag."""

    def __init__(self, path: str, field: FieldInfo) -> None:
        extra = _extra(field)
        self.path, self.field, self.flag = path, field, str(extra["flag"])
        self.repeat, self.text = bool(extra.get("repeat")), bool(extra.get("text"))
        self.show_default = bool(extra.get("show_default", True))
        self.param = path.replace(".", "__")

    def annotation(self) -> Any:
        """What the command line parses: lists come as comma-separated text (or a repeated flag); every
        option may be absent (the config file or the model default fills it)."""
        if self.repeat:
            return list[str] | None
        if self.text:
            return str | None
        kind: Any = self.field.annotation  # any type form: a class, a union, list[...], Literal[...]
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if typing.get_origin(kind) in (typing.Union, types.UnionType) and len(args) == 1:
            kind = args[0]
        if typing.get_origin(kind) in (list, typing.Literal) or (isinstance(kind, type) and issubclass(kind, Spec)):
            kind = str  # the model checks the value (a spec parses its text): one-line errors
        return kind | None

    def default(self) -> Any:
        """The field's default as the command line spells it (a comma-separated list as text)."""
        value = self.field.get_default(call_default_factory=True)
        if value is PydanticUndefined or value == {}:  # an empty table (`--trl`): nothing given
            return None
        if isinstance(value, list) and not self.repeat:
            return ",".join(map(str, value)) or None
        return str(value) if isinstance(value, Spec) else value

    def help(self) -> str | None:
        """The field's description, then its bounds in words (pydantic checks them; the help says them)."""
        words = {"ge": "at least", "gt": "more than", "le": "at most", "lt": "less than"}
        bounds = [f"{words[name]} {getattr(m, name)}" for m in self.field.metadata for name in words
                  if getattr(m, name, None) is not None]
        if not bounds:
            return self.field.description
        return f"{self.field.description or ''} ({', '.join(bounds)}.)".lstrip()

    def parameter(self) -> inspect.Parameter:
        default = self.default()
        option = typer.Option(self.flag, help=self.help(),
                              show_default=self.show_default and default not in (None, []))
        return inspect.Parameter(self.param, inspect.Parameter.KEYWORD_ONLY, default=default,
                                 annotation=Annotated[self.annotation(), option])


def model_options(model: type[BaseModel], prefix: str = "") -> list[ModelOption]:
    options = []
    for name, field in model.model_fields.items():
        nested = _nested_model(field)
        if nested is not None:
            options += model_options(nested, f"{prefix}{name}.")
        elif "flag" in _extra(field):
            options.append(ModelOption(f"{prefix}{name}", field))
    return options


def _set(tree: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for key in parents:
        node = tree.get(key)
        tree[key] = node = dict(node) if isinstance(node, dict) else {}
        tree = node
    tree[leaf] = value


def _get(tree: dict[str, Any], path: str) -> Any:
    node: Any = tree
    for key in path.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


def build_settings(model: type[BaseModel], ctx: click.Context, given: dict[str, Any], fixed: dict[str, Any],
                   config_file: Path | None, section: str | None = None) -> BaseModel:
    """The model from the config file, the flags given on the command line (which win) and `fixed` values
    (e.g. positional arguments). A bad value names its flag, or the config file and its key."""
    options = model_options(model)
    from_file = read_config_file(config_file, section) if config_file else {}
    typo = unknown_key(model, from_file)
    if typo:
        raise InputError(f"{config_file}: {typo}", None,
                         f"not a setting of this command{did_you_mean_key(model, typo)}")
    data = dict(from_file)
    from_flags: dict[str, str] = {}
    for option in options:
        source = ctx.get_parameter_source(option.param)
        if source is not None and source.name != "DEFAULT":
            value, table = given[option.param], _get(data, option.path)
            if option.repeat and isinstance(table, dict):  # KEY=VALUE flags add to the file's table (--trl)
                value = [table, *value]
            _set(data, option.path, value)
            from_flags[option.path] = option.flag
    data.update(fixed)
    try:
        return model.model_validate(data)
    except InputError as e:  # a spec's own one line names its flag: the file's key where the file gave it
        path = next((o.path for o in options if o.flag == e.source and o.path not in from_flags), None)
        if config_file and path in _paths(from_file):
            raise InputError(f"{config_file}: {path}", e.field, e.problem) from None
        raise
    except ValidationError as e:
        error = e.errors()[0]
        loc = [str(part) for part in error["loc"]]
        in_file = _paths(from_file)
        paths = [".".join(loc[:n]) for n in range(len(loc), 0, -1)]  # `bf16.bool`: a union member of bf16
        path = next((p for p in paths if p in from_flags or p in in_file), ".".join(loc))
        if path in from_flags:
            where = from_flags[path]
        elif config_file and path in in_file:
            where = f"{config_file}: {path}"
        else:  # e.g. a required setting given nowhere
            where = next((o.flag for o in options if o.path == path), path or "options")
        raise InputError(where, None, f"{error['msg']}{_closest_choice(error)}") from None


def _closest_choice(error: Any) -> str:
    """`; did you mean docker?` after pydantic's list of allowed values, for a value that is not one of them."""
    if error["type"] != "literal_error" or not isinstance(error.get("input"), str):
        return ""
    return did_you_mean(error["input"], re.findall(r"'([^']*)'", str(error.get("ctx", {}).get("expected", ""))))


def _paths(tree: dict[str, Any], prefix: str = "") -> set[str]:
    out = set()
    for key, value in tree.items():
        out.add(f"{prefix}{key}")
        if isinstance(value, dict):
            out |= _paths(value, f"{prefix}{key}.")
    return out


def config_table(command: str) -> str:
    """The table of a config file that holds a command's settings: `train_sft`, `rescue_train`."""
    return command.replace("-", "_").replace(" ", "_")


def config_option(command: str) -> inspect.Parameter:
    return inspect.Parameter(
        "config_file", inspect.Parameter.KEYWORD_ONLY, default=None,
        annotation=Annotated[Path | None, typer.Option(
            CONFIG_FLAG, help=f"A TOML or YAML file of these settings, at its top or in a table "
            f"`{config_table(command)}` (the flags given here win).")])


def command_from_model(model: type[BaseModel], command: str, leading: list[inspect.Parameter],
                       body: Callable[[Any, dict[str, Any]], None]) -> Callable[..., None]:
    """A function typer can turn into command `command`: `leading` parameters (arguments, and options that
    are not settings, such as `--no-preflight`), one option per flagged field of `model`, and `--config`.
    A leading parameter named like a field is that setting. `body(settings, values)` receives the
    validated model and every parameter's value; a bad setting raises `InputError` naming its flag or config key."""
    context = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)
    params = [context, *leading, *(o.parameter() for o in model_options(model)), config_option(command),
              *log_options()]
    section = config_table(command)

    def run(**values: Any) -> None:
        fixed = {p.name: values[p.name] for p in leading if p.name in model.model_fields}
        settings = build_settings(model, values["ctx"], values, fixed, values["config_file"], section)
        given = settings.model_dump(mode="json", exclude_defaults=True)
        log.info("%s with %s (the rest as default)", command, " ".join(f"{k}={v}" for k, v in given.items()))
        body(settings, values)

    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params}
    run.__doc__ = body.__doc__
    run.__name__ = body.__name__
    setattr(run, SETTINGS_MODEL, model)
    return run


VERBOSE_HELP = f"Log what the command does (also {VERBOSE_ENV}=1)."
DEBUG_HELP = f"Log in detail, and print the traceback of an internal error (also {DEBUG_ENV}=1)."


def on_verbose(value: bool) -> None:
    """`--verbose` given: log at INFO (or keep a more detailed level already set)."""
    if value:
        set_level(logging.INFO)


def on_debug(value: bool) -> None:
    """`--debug` given: log at DEBUG, and an internal error prints its traceback."""
    if value:
        set_level(logging.DEBUG)


def log_options() -> list[inspect.Parameter]:
    """`--verbose` and `--debug`, on the root command and on each command (`unscaffold run ... --debug`); read
    before the other options, so a bad value of one of them is already logged at the level asked for."""
    return [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[
        bool, typer.Option(flag, help=help, callback=callback, is_eager=True)])
        for name, flag, help, callback in (("verbose", "--verbose", VERBOSE_HELP, on_verbose),
                                           ("debug", "--debug", DEBUG_HELP, on_debug))]


def argument(name: str, kind: Any, help: str, default: Any = inspect.Parameter.empty) -> inspect.Parameter:
    """A positional argument of a generated command (a setting where `name` is a field)."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[kind, typer.Argument(help=help)])


def setting_argument(model: type[BaseModel], name: str, kind: Any) -> inspect.Parameter:
    """A positional argument that is the setting `name` of `model`, helped by the field's description."""
    return argument(name, kind, model.model_fields[name].description or "")


def switch(name: str, flag: str, help: str) -> inspect.Parameter:
    """An on/off option of a generated command that is not a setting (e.g. `--no-preflight`)."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=False,
                             annotation=Annotated[bool, typer.Option(flag, help=help)])


def suite_arguments(model: type[BaseModel]) -> list[inspect.Parameter]:
    """The leading parameters of a command that runs a suite's trials: the suite, then `--no-preflight`."""
    return [setting_argument(model, "suite", str), switch("no_preflight", "--no-preflight", NO_PREFLIGHT_HELP)]


def option(name: str, kind: Any, help: str, default: Any = inspect.Parameter.empty) -> inspect.Parameter:
    """An option of a generated command that is not a setting (e.g. where a run writes)."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[kind, typer.Option(help=help)])
