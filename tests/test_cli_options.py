"""Every command's options come from one settings model: each option's default is its field's default, each
help its field's description, and `--config FILE` (TOML or YAML) gives any setting, the flags winning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import BaseModel
from typer.main import get_command
from typer.testing import CliRunner

from unscaffold.cli import app
from unscaffold.cli_options import (
    SETTINGS_MODEL,
    ModelOption,
    argument,
    command_from_model,
    config_table,
    model_options,
)
from unscaffold.config_file import read_config_file
from unscaffold.errors import InputError
from unscaffold.specs import ModelSpec, Spec

# Options that say how to run a command, not what it computes, so no settings model holds them.
NOT_SETTINGS = {"no_preflight", "resume", "config_file", "help", "verbose", "debug"}
# train-sft keeps its data and output folder beside its settings: train_config.json is the recipe alone.
OUTSIDE_THE_MODEL = {"train-sft": {"data", "out"}}
# Commands whose options are still declared by hand.
HAND_WRITTEN: set[str] = set()


def commands(group: Any, prefix: str = "") -> dict[str, Any]:
    """Every command of the app by its full name (typer brings its own click: its classes are not click's)."""
    found: dict[str, Any] = {}
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            found |= commands(command, f"{prefix}{name} ")
        else:
            found[f"{prefix}{name}"] = command
    return found


ALL = commands(get_command(app))
GENERATED = {name: getattr(c.callback, SETTINGS_MODEL) for name, c in ALL.items()
             if getattr(c.callback, SETTINGS_MODEL, None) is not None}


def test_every_command_is_generated_from_its_settings_but_those_named() -> None:
    assert set(ALL) - set(GENERATED) == HAND_WRITTEN
    assert {"run", "train-sft", "rescue train", "rescue route", "evolve", "demo"} <= set(GENERATED)


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_each_option_default_is_its_field_default(name: str) -> None:
    model: type[BaseModel] = GENERATED[name]
    options = {o.param: o for o in model_options(model)}
    params = {p.name: p for p in ALL[name].params if p.name}
    assert set(options) <= set(params)
    for pname, param in params.items():
        if pname in NOT_SETTINGS or pname in OUTSIDE_THE_MODEL.get(name, set()):
            continue
        if param.param_type_name == "argument":
            assert pname in model.model_fields, f"{name}: argument {pname} is no setting"
            continue
        assert pname in options, f"{name}: {param.opts} is not a field of {model.__name__}"
        option = options[pname]
        field_default = option.field.get_default(call_default_factory=True)
        if field_default is _undefined():  # required: absent on the command line
            field_default = None
        if option.repeat:  # a repeated option holds a list, none given for an empty one
            assert list(param.default or []) == list(field_default or []), (name, param.opts)
        else:
            if isinstance(field_default, list):  # as comma-separated text
                field_default = ",".join(field_default) or None
            if isinstance(field_default, Spec):  # as its text
                field_default = str(field_default)
            assert param.default == field_default, (name, param.opts)
        assert param.help == option.help() and param.help.startswith(option.field.description), (name, param.opts)
        assert option.flag.split("/")[0] in param.opts


def _undefined() -> Any:
    from pydantic_core import PydanticUndefined

    return PydanticUndefined


def _settable(model: type[BaseModel]) -> tuple[ModelOption, Any, Any, list[str]]:
    """A top-level flagged setting, a value for a file, another for the flag (as typed and as given)."""
    for option in model_options(model):
        kind, default = option.annotation(), option.field.default
        if "." in option.path or option.repeat:
            continue
        if kind == int | None and isinstance(default, int) and not isinstance(default, bool):
            return option, default + 1, default + 2, [str(default + 2)]
        if kind == Path | None:
            return option, Path("from-file"), Path("from-flag"), ["from-flag"]
        if kind == str | None and option.field.annotation in (str, str | None):
            return option, "from-file", "from-flag", ["from-flag"]
    raise AssertionError(f"{model.__name__}: no setting to try")


def _required(model: type[BaseModel], arguments: set[str]) -> dict[str, Any]:
    """A value for each required setting, so that the model validates (a model spec's text: a replay)."""
    return {name: ["x"] if "list" in str(f.annotation) else "replay:x" if f.annotation is ModelSpec else "x"
            for name, f in model.model_fields.items() if f.is_required() and name not in arguments}


def _write(path: Path, tree: dict[str, Any]) -> Path:
    if path.suffix == ".toml":
        path.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in tree.items()))
    else:
        import yaml

        path.write_text(yaml.safe_dump(tree))
    return path


@pytest.mark.parametrize("suffix", [".toml", ".yaml", ".yml"])
@pytest.mark.parametrize("name", sorted(GENERATED))
def test_a_config_file_gives_any_setting_and_flags_win(name: str, suffix: str, tmp_path: Path) -> None:
    """The command's own model and options, with a body that keeps what it is given."""
    model = GENERATED[name]
    arguments = [p for p in ALL[name].params if p.param_type_name == "argument"]
    got: list[BaseModel] = []
    test_app = typer.Typer()
    test_app.command(name.replace(" ", "-"))(command_from_model(
        model, name, [argument(a.name or "", list[str] if a.nargs == -1 else str, "") for a in arguments],
        lambda s, v: got.append(s)))
    test_app.command("unused")(lambda: None)  # two commands: the name is given on the command line
    option, from_file, from_flag, given = _settable(model)
    section = config_table(name)
    settings = {**_required(model, {a.name or "" for a in arguments}), option.path: str(from_file)
                if isinstance(from_file, Path) else from_file}
    tree = {section: settings} if suffix == ".yml" else settings  # a table named after the command, or the top
    config = _write(tmp_path / f"settings{suffix}", tree)
    argv = [name.replace(" ", "-"), *("s" for _ in arguments), "--config", str(config)]
    for extra, expected in (([], from_file), ([option.flag.split("/")[0], *given], from_flag)):
        result = CliRunner().invoke(test_app, [*argv, *extra])
        assert result.exit_code == 0, result.output
        assert getattr(got[-1], option.path) == expected


def test_bad_config_files_are_one_line_naming_file_and_key(tmp_path: Path) -> None:
    def invoke(*argv: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, ["train-sft", str(tmp_path / "data.jsonl"), "--out", str(tmp_path / "o"),
                                          *argv])
        return result.exit_code, result.output

    typo = _write(tmp_path / "typo.yaml", {"lora_rank": 8})
    assert invoke("--config", str(typo)) == (
        2, f"error: {typo}: lora_rank: not a setting of this command; did you mean lora_r?\n")
    bad = _write(tmp_path / "bad.yaml", {"train_sft": {"lora-r": "many"}})
    assert invoke("--config", str(bad)) == (
        2, f"error: {bad}: lora_r: Input should be a valid integer, unable to parse string as an integer\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("lora_r: [1\n")
    code, out = invoke("--config", str(broken))
    assert code == 2 and out.startswith(f"error: {broken}: invalid YAML: ") and out.count("\n") == 1
    other = tmp_path / "settings.json"
    other.write_text("{}")
    assert invoke("--config", str(other)) == (2, f"error: {other}: a config file ends in .toml, .yaml or .yml\n")
    assert invoke("--bf16", "maybe")[1].startswith("error: --bf16: Input should be a valid boolean")
    assert not (tmp_path / "o").exists()


def test_a_nested_setting_from_yaml_and_flat_keys_of_earlier_files(tmp_path: Path) -> None:
    from unscaffold.config_file import unknown_key
    from unscaffold.run.models import RunConfig

    path = _write(tmp_path / "run.yaml", {"student": "oracle", "sandbox": {"command-timeout-s": 5}, "max_turns": 3})
    tree = read_config_file(path, "run")
    assert tree == {"student": "oracle", "sandbox": {"command_timeout_s": 5}, "max_turns": 3}
    assert unknown_key(RunConfig, tree) is None
    assert unknown_key(RunConfig, {"sandbox": {"kind": "local", "timeout": 1}}) == "sandbox.timeout"
    with pytest.raises(InputError) as err:
        read_config_file(_write(tmp_path / "list.yaml", {"a": 1}).with_name("missing.yaml"))
    assert str(err.value) == f"{tmp_path / 'missing.yaml'}: file not found"


def test_the_real_train_sft_reads_the_file_and_the_flag_wins(tmp_path: Path) -> None:
    """End to end: the base model the preflight refuses shows where the setting came from."""
    config = _write(tmp_path / "c.yaml", {"model": "tiny:FROMFILE"})

    def refused(*argv: str) -> str:
        result = CliRunner().invoke(app, ["train-sft", str(tmp_path / "d.jsonl"), "--out", str(tmp_path / "o"),
                                          "--config", str(config), *argv])
        assert result.exit_code == 2
        return result.output.split(":")[1]

    assert refused() == " --model tiny"
    assert refused("--model", "tiny:FROMFLAG") == " --model tiny"
    assert "'FROMFILE'" in CliRunner().invoke(app, ["train-sft", "d.jsonl", "--out", str(tmp_path / "o"),
                                                    "--config", str(config)]).output
    assert "'FROMFLAG'" in CliRunner().invoke(app, ["train-sft", "d.jsonl", "--out", str(tmp_path / "o"),
                                                    "--config", str(config), "--model", "tiny:FROMFLAG"]).output


def test_an_options_help_says_its_bounds_in_words() -> None:
    from pydantic import BaseModel, Field

    from unscaffold.cli_options import model_options
    from unscaffold.flags import flag

    class Bounded(BaseModel):
        turns: int = Field(40, ge=1, description="Turns.", json_schema_extra=flag("--turns"))
        share: float = Field(0.5, gt=0, le=1, description="A share.", json_schema_extra=flag("--share"))
        name: str = Field("x", description="A name.", json_schema_extra=flag("--name"))

    assert [o.help() for o in model_options(Bounded)] == [
        "Turns. (at least 1.)", "A share. (more than 0, at most 1.)", "A name."]


def test_every_rescue_train_setting_is_a_documented_option() -> None:
    """A setting reachable only from a config file is a setting nobody finds: each is an option with help."""
    model: type[BaseModel] = GENERATED["rescue train"]
    options = {o.param: o for o in model_options(model)}
    arguments = {p.name for p in ALL["rescue train"].params if p.param_type_name == "argument"}
    for name, field in model.model_fields.items():
        assert name in options or name in arguments, f"rescue train: {name} has no option"
        assert field.description, f"rescue train: {name} has no help"
