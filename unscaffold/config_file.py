"""A settings file a person writes for a command: TOML or YAML by its suffix, keys as the settings model names
them (a `-` may stand for `_`), optionally under a table named after the command, no key the model lacks."""

from __future__ import annotations

import tomllib
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from unscaffold.errors import InputError, did_you_mean

CONFIG_FORMATS = {".toml": "TOML", ".yaml": "YAML", ".yml": "YAML"}


def _nested_model(kind: Any) -> type[BaseModel] | None:
    """A section of settings; a spec (`--student`, ...) is one value, its fields checked by the spec."""
    from unscaffold.specs.base import Spec

    return kind if isinstance(kind, type) and issubclass(kind, BaseModel) and not issubclass(kind, Spec) else None


def _underscored(tree: Any) -> Any:
    """Keys as the model names them: a file may write `lora-r` for `lora_r`."""
    if isinstance(tree, dict):
        return {str(k).replace("-", "_"): _underscored(v) for k, v in tree.items()}
    return tree


def read_config_file(path: Path, section: str | None = None) -> dict[str, Any]:
    """The settings in a TOML (`.toml`) or YAML (`.yaml`, `.yml`) file; a table named `section` (the
    command, e.g. `train_sft`) is read instead of the whole file where there is one."""
    path = Path(path)
    kind = CONFIG_FORMATS.get(path.suffix)
    if kind is None:
        raise InputError(str(path), None, "a config file ends in .toml, .yaml or .yml")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(path), None, "file not found") from None
    except (UnicodeDecodeError, IsADirectoryError) as e:
        raise InputError(str(path), None, f"unreadable: {e}") from None
    try:
        if kind == "TOML":
            data: Any = tomllib.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
            data = {} if data is None else data
    except tomllib.TOMLDecodeError as e:
        raise InputError(str(path), None, f"invalid TOML: {e}") from None
    except Exception as e:  # yaml.YAMLError; its message spans lines
        raise InputError(str(path), None, f"invalid YAML: {' '.join(str(e).split())}") from None
    if isinstance(data, dict) and section and isinstance(data.get(section), dict):
        data = data[section]
    if not isinstance(data, dict):
        raise InputError(str(path), None, "expected a table of settings")
    return typing.cast(dict[str, Any], _underscored(data))


def unknown_key(model: type[BaseModel], tree: dict[str, Any], prefix: str = "") -> str | None:
    """The first key of a config file the model has no field for (a typo), as a dotted path. A nested
    model's settings may also sit flat at the top, as earlier config.json files wrote them."""
    nested = {name: m for name, f in model.model_fields.items() if (m := _nested_model(f.annotation)) is not None}
    flat = {k for m in nested.values() for k in m.model_fields} if not prefix else set()
    for key, value in tree.items():
        if key in nested and isinstance(value, dict):
            found = unknown_key(nested[key], value, f"{prefix}{key}.")
            if found:
                return found
        elif key not in model.model_fields and key not in flat:
            return f"{prefix}{key}"
    return None


def did_you_mean_key(model: type[BaseModel], path: str) -> str:
    """`; did you mean lora_r?` for a mistyped key `path` (dotted, as `unknown_key` gives it): the closest
    setting at the same level of the model."""
    *parents, leaf = path.split(".")
    for name in parents:
        found = _nested_model(model.model_fields[name].annotation) if name in model.model_fields else None
        if found is None:
            return ""
        model = found
    names = set(model.model_fields)
    if not parents:  # nested settings may also sit flat at the top
        names |= {k for f in model.model_fields.values() if (m := _nested_model(f.annotation)) for k in m.model_fields}
    return did_you_mean(leaf, names)
