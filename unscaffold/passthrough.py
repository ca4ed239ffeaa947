"""`--trl KEY=VALUE` and `--peft KEY=VALUE`: any field of a TRL or PEFT config dataclass, given to a training
command beside the settings it exposes, so a recipe's flags need not copy every field of `SFTConfig`,
`GRPOConfig` or `LoraConfig`.

A value is read as a TOML or JSON literal (`0.5`, `true`, `[1, 2]`, `{"a": 1}`, `'text'`), else taken as
text; a key is checked against the dataclass's own fields (with the closest one named for a typo) and its
value against the field's type. A key the recipe sets from one of its own settings is refused, naming the
flag to use instead; a key the recipe fixes because the command depends on it is refused with why; a key
the recipe only gives a default (`defaults`) is replaced by the value given. What is given is kept in the
command's settings, so the run's records say what it used."""

from __future__ import annotations

import dataclasses
import difflib
import enum
import importlib
import json
import tomllib
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from unscaffold.flags import flag

ERROR_KIND = "pass_through"


def _refuse(message: str) -> PydanticCustomError:
    """An error pydantic reports with this message alone (the command line names the flag or file key)."""
    return PydanticCustomError(ERROR_KIND, message.replace("{", "{{").replace("}", "}}"))


def literal(text: str) -> Any:
    """A value as written after `KEY=`: a JSON or TOML literal where it is one, else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return str(text)


def pairs(value: Any) -> Any:
    """The settings as a table: `KEY=VALUE` texts (repeated flags), a table (a config file), or both in
    order (the file's table, then the flags, which win); a `-` in a key stands for `_`."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k).replace("-", "_"): v for k, v in value.items()}
    if not isinstance(value, list):
        return value  # pydantic then says a table is expected
    table: dict[str, Any] = {}
    for item in value:
        if isinstance(item, dict):
            table.update(pairs(item))
            continue
        key, sep, text = str(item).partition("=")
        if not sep or not key.strip():
            raise _refuse(f"{item!r} is not KEY=VALUE")
        table[key.strip().replace("-", "_")] = _Given(text)
    return table


class _Given(str):
    """A value as typed on the command line, read as a literal once its field's type is known."""


PassedThrough = Annotated[dict[str, Any], BeforeValidator(pairs)]  # a settings field holding such a table


@dataclass(frozen=True)
class PassThrough:
    """The fields of one config dataclass a command passes through, and which of them its recipe sets.

    `set_by`: a field the recipe sets -> the flag that sets it (`--learning-rate`) or why it is fixed.
    `defaults`: fields the recipe only gives a default, which a value given here replaces."""

    flag: str
    target: str  # module.Class, imported when a key is checked (TRL and PEFT take seconds to import)
    set_by: Mapping[str, str] = field(default_factory=dict)
    defaults: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return self.target.rsplit(".", 1)[1]

    def setting(self) -> Any:
        """The settings field that takes these keys: a repeatable flag, its help from the dataclass."""
        return Field(default_factory=dict, json_schema_extra=flag(self.flag, repeat=True), description=self.help())

    def help(self) -> str:
        """The option's help: what it passes, how values are read, and the config file's table."""
        table = self.flag.removeprefix("--")
        return (f"Any other field of {self.target.split('.')[0].upper()}'s {self.name}, as KEY=VALUE (repeat; the "
                f"value a TOML or JSON literal, else text); in a --config file, a table `{table}` (the flags add "
                "to it). A field this command sets from its own settings is refused.")

    def dataclass(self) -> type:
        module, name = self.target.rsplit(".", 1)
        return typing.cast(type, getattr(importlib.import_module(module), name))

    def fields(self) -> dict[str, Any]:
        """Each field a constructor takes -> its type."""
        cls = self.dataclass()
        hints = typing.get_type_hints(cls)
        return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(cls) if f.init}

    def check(self, values: dict[str, Any], own: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The values, each checked against the dataclass and the recipe (one line naming the key if not);
        `own`: the command's settings -> their flags, for a key that is one of them and not a field."""
        if not values:
            return values
        fields = self.fields()
        checked: dict[str, Any] = {}
        for key, value in values.items():
            if key not in fields:
                raise _refuse(self._unknown(key, list(fields), own or {}))
            setter = self.set_by.get(key)
            if setter is not None and key not in self.defaults:
                raise _refuse(f"{key}: set by {setter}, not {self.flag}" if setter.startswith("--")
                              else f"{key}: fixed by this command ({setter})")
            checked[key] = _typed(key, value, fields[key])
        return checked

    def _unknown(self, key: str, fields: list[str], own: Mapping[str, str]) -> str:
        if key in own:
            return f"{key}: not a field of {self.name}; it is this command's {own[key]}"
        close = difflib.get_close_matches(key, [*fields, *own], n=1)
        if not close:
            return f"{key}: not a field of {self.name}"
        return f"{key}: not a field of {self.name}; did you mean " + (
            f"this command's {own[close[0]]}?" if close[0] in own and close[0] not in fields else f"{close[0]}?")

    def apply(self, recipe: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
        """The constructor's arguments: the recipe's, then the values given (checked by `check`)."""
        unnamed = set(recipe) - set(self.set_by) - self.defaults
        if unnamed:  # the recipe and its table of keys must not drift apart
            raise RuntimeError(f"{self.flag}: the recipe sets {sorted(unnamed)}, which set_by does not name")
        return {**recipe, **values}


def _typed(key: str, value: Any, kind: Any) -> Any:
    """The value as the field's type reads it (a command-line value read as a literal, else as text); an
    enumeration's member as its plain value, so the records stay plain JSON."""
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(kind, config=ConfigDict(arbitrary_types_allowed=True))
    except Exception:  # noqa: BLE001 - a type pydantic cannot check (e.g. a config object): the constructor does
        return literal(value) if isinstance(value, _Given) else value
    candidates = [literal(value), str(value)] if isinstance(value, _Given) else [value]
    problem = ""
    for candidate in candidates:
        try:
            typed = adapter.validate_python(candidate)
        except ValidationError as e:
            problem = problem or e.errors()[0]["msg"]
            continue
        return typed.value if isinstance(typed, enum.Enum) else typed
    raise _refuse(f"{key}: {problem} (got {candidates[0]!r})")


def own_flags(model: Any) -> dict[str, str]:
    """A settings model's fields -> their flags (for 'it is this command's --flag')."""
    return {name: str(f.json_schema_extra["flag"]) for name, f in model.model_fields.items()
            if isinstance(f.json_schema_extra, dict) and "flag" in f.json_schema_extra}


def checked(*specs: PassThrough) -> Any:
    """The validator of a settings model's pass-through fields, each named after its spec's flag (`trl`,
    `peft`): keys are checked against the dataclass and against the model's own flags."""
    by_field = {spec.flag.removeprefix("--"): spec for spec in specs}

    def check(cls: type, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        return by_field[str(info.field_name)].check(value, own_flags(cls))

    return field_validator(*by_field)(classmethod(check))
