"""Every way a command fails ends the same way: bad input or a bad option is one line and exit 2, an internal
error is one line naming the file that keeps its traceback and exit 1, and `--debug` prints that traceback."""

from __future__ import annotations

import logging
import re
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers import HARBOR_EXAMPLES
from unscaffold.cli import app
from unscaffold.console import LOGGER

BUG = "error: internal error (a bug in unscaffold): RuntimeError: boom"


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.output


def test_a_value_that_does_not_parse_is_one_line_exit_2() -> None:
    assert invoke("train-sft", "d.jsonl", "--out", "o", "--lora-r", "x") == (
        2, "error: --lora-r: Input should be a valid integer, unable to parse string as an integer "
           "(see 'root train-sft --help')\n")


def test_an_unknown_option_names_the_closest_one() -> None:
    assert invoke("train-sft", "d.jsonl", "--out", "o", "--lorar", "8") == (
        2, "error: --lorar: no such option; did you mean --lora-r? (see 'root train-sft --help')\n")
    assert invoke("--verbos") == (2, "error: --verbos: no such option; did you mean --verbose? (see 'root --help')\n")


def test_a_missing_argument_and_an_unknown_command_are_one_line_exit_2() -> None:
    assert invoke("run") == (2, "error: Missing argument 'suite' (see 'root run --help')\n")
    assert invoke("rn") == (2, "error: No such command 'rn'. Did you mean 'run'? (see 'root --help')\n")
    assert invoke("run", "harbor", "--student") == (2, "error: Option '--student' requires an argument\n")


def test_a_mistyped_config_key_names_file_key_and_the_closest_setting(tmp_path: Path) -> None:
    config = tmp_path / "train.toml"
    config.write_text("[train_sft]\nlora-rr = 8\n")
    assert invoke("train-sft", "d.jsonl", "--out", str(tmp_path / "o"), "--config", str(config)) == (
        2, f"error: {config}: lora_rr: not a setting of this command; did you mean lora_r?\n")
    config.write_text("[run]\nsandbox = {kind = 'local', command_timeout = 5}\n")
    assert invoke("run", "harbor", "--config", str(config)) == (
        2, f"error: {config}: sandbox.command_timeout: not a setting of this command; did you mean "
           "command_timeout_s?\n")


def test_a_value_out_of_a_list_of_choices_names_the_closest_one() -> None:
    assert invoke("run", "harbor", "--student", "oracle", "--out", "o", "--sandbox", "dockr") == (
        2, "error: --sandbox: Input should be 'local', 'docker' or 'none'; did you mean docker?\n")
    assert invoke("compile-k", "bank", "--out", "k", "--sandbox", "locl") == (
        2, "error: --sandbox: unknown kind 'locl'; use local, docker or none; did you mean local?\n")


def _run_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    import unscaffold.run.runner

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(unscaffold.run.runner, "run", broken)


def _run_args(tmp_path: Path) -> list[str]:
    return ["run", "harbor", "--data", str(HARBOR_EXAMPLES), "--student", "oracle", "--no-preflight", "--out",
            str(tmp_path / "run")]


def test_an_internal_error_is_one_line_naming_its_traceback_file_exit_1(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _run_raises(monkeypatch)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code, out = invoke(*_run_args(tmp_path))
    [kept] = tmp_path.glob("unscaffold-traceback-*.txt")
    assert (code, out) == (1, f"{BUG} (its traceback is in {kept}; re-run with --debug to see it)\n")
    text = kept.read_text()
    assert text.startswith("unscaffold ") and "Traceback (most recent call last):" in text
    assert text.rstrip().endswith("RuntimeError: boom") and "in broken" in text


@pytest.mark.parametrize("where", ["after", "before", "env"])
def test_debug_prints_the_traceback(where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _run_raises(monkeypatch)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    args = {"after": [*_run_args(tmp_path), "--debug"], "before": ["--debug", *_run_args(tmp_path)],
            "env": _run_args(tmp_path)}[where]
    code, out = invoke(*args, env={"UNSCAFFOLD_DEBUG": "1"} if where == "env" else None)
    lines = out.splitlines()
    assert code == 1 and lines[-1] == BUG
    traceback = lines[lines.index("Traceback (most recent call last):"):-1]
    assert traceback[-1] == "RuntimeError: boom" and any("in broken" in line for line in traceback)
    assert not list(tmp_path.glob("unscaffold-traceback-*.txt"))  # printed, not kept


def test_debug_shows_where_an_input_error_came_from(tmp_path: Path) -> None:
    code, out = invoke("report", str(tmp_path / "nowhere"))
    assert (code, out) == (2, f"error: {tmp_path / 'nowhere' / 'results.json'}: file not found\n")
    code, out = invoke("report", str(tmp_path / "nowhere"), "--debug")
    lines = out.splitlines()
    assert code == 2 and lines[-1] == f"error: {tmp_path / 'nowhere' / 'results.json'}: file not found"
    assert "Traceback (most recent call last):" in lines and lines[-2].startswith("unscaffold.errors.InputError: ")


def test_verbose_logs_the_settings_given_and_each_command_starts_unconfigured(tmp_path: Path) -> None:
    code, out = invoke("report", str(tmp_path / "nowhere"), "--out", str(tmp_path / "r.html"), "--verbose",
                       env={"COLUMNS": "400"})  # a log line as wide as the terminal: unwrapped
    assert code == 2
    assert [line.rstrip() for line in out.splitlines()] == [
        f"INFO     report with run_dir={tmp_path / 'nowhere'} out={tmp_path / 'r.html'} (the rest as default)",
        f"error: {tmp_path / 'nowhere' / 'results.json'}: file not found"]
    assert invoke("report", str(tmp_path / "nowhere")) == (
        2, f"error: {tmp_path / 'nowhere' / 'results.json'}: file not found\n")  # no log line: the level is reset
    assert logging.getLogger(LOGGER).level == logging.NOTSET and not logging.getLogger(LOGGER).handlers


def test_a_clean_exit_keeps_its_status(tmp_path: Path) -> None:
    assert invoke("exec", "--sandbox", "none", "--workspace", str(tmp_path), "--", "exit 3")[0] == 1
    code, out = invoke("--version")
    assert code == 0 and re.fullmatch(r"unscaffold \S+\n", out)
