"""One run configuration: RunConfig is the only declaration of `unscaffold run`'s settings, a TOML file can
give every one of them, and config.json of earlier versions still resumes."""

from __future__ import annotations

import json
from pathlib import Path

import click
from typer.main import get_command
from typer.testing import CliRunner

from tests.helpers import HARBOR_EXAMPLES, needs_bwrap
from unscaffold.cli import app
from unscaffold.cli_options import model_options
from unscaffold.minimal_harness.agent import AgentConfig
from unscaffold.minimal_harness.sandbox.base import DEFAULT_COMMAND_TIMEOUT_S, SandboxConfig, SandboxSettings
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run

RUN_FLAGS = ["--no-preflight", "--student", "--out", "--data", "--split", "--split-file", "--tasks", "--trials",
             "--concurrency", "--harness", "--finish-checks", "--opening", "--router", "--router-validation",
             "--reviewer", "--knowledge", "--budget", "--reviewer-reads-gold", "--empty-k",
             "--reviewer-concurrency", "--infra-retries", "--executor",
             "--sandbox",
             "--command-timeout", "--keep-workspace", "--base-image",
             "--max-turns", "--max-wall", "--max-cost", "--output-cut", "--price-in", "--price-out",
             "--temperature", "--top-p", "--max-tokens", "--sampling-seed", "--config", "--verbose", "--debug"]


def run_command() -> click.Command:
    return get_command(app).commands["run"]  # type: ignore[attr-defined]


def test_the_run_command_has_exactly_its_flags_each_documented_once() -> None:
    params = run_command().params
    assert [p.name for p in params if type(p).__name__.endswith("Argument")] == ["suite"]
    options = [p for p in params if type(p).__name__.endswith("Option")]
    assert [o.opts[0] for o in options if o.opts[0] != "--help"] == RUN_FLAGS
    for option in model_options(RunConfig):
        assert option.field.description  # the only place the help is written
    helps = {o.opts[0]: o.help for o in options}
    # the description, then the bound in words
    assert helps["--max-wall"] == AgentConfig.model_fields["max_wall_s"].description + " (more than 0.)"
    assert helps["--command-timeout"] == (SandboxSettings.model_fields["command_timeout_s"].description
                                          + " (more than 0.)")


def test_the_command_timeout_default_is_one_constant(tmp_path: Path) -> None:
    assert SandboxSettings().command_timeout_s == DEFAULT_COMMAND_TIMEOUT_S
    assert SandboxConfig(workspace=tmp_path).timeout_s == DEFAULT_COMMAND_TIMEOUT_S
    assert RunConfig(suite="harbor", student="oracle", out=tmp_path).sandbox.command_timeout_s == 600.0
    assert "command_timeout_s" not in AgentConfig.model_fields


def test_flat_settings_of_earlier_config_json_are_nested(tmp_path: Path) -> None:
    flat = {"suite": "harbor", "student": "oracle", "out": str(tmp_path), "task_ids": None, "sandbox": "none",
            "max_turns": 7, "command_timeout_s": 5.0, "max_wall_s": 30.0, "price_in_per_mtok": 1.5}
    config = RunConfig.model_validate(flat)
    assert config.sandbox == SandboxSettings(kind="none", command_timeout_s=5.0)
    assert config.agent == AgentConfig(max_turns=7, max_wall_s=30.0, price_in_per_mtok=1.5)
    assert config.identity() == RunConfig.identity_of(flat) == {
        "suite": "harbor", "student": {"kind": "oracle"}, "data": None, "split": None, "split_file": None,
        "task_ids": None, "trials": 1, "harness": {"kind": "minimal"}, "opening": None, "finish_checks": True,
        "reviewer": None, "knowledge": None, "budget": 5, "reviewer_reads_gold": False, "empty_k": False,
        "max_turns": 7,
        "sampling": {"temperature": None, "top_p": None, "max_tokens": None, "seed": None}}
    assert RunConfig.model_validate(config.model_dump(mode="json")) == config


@needs_bwrap
def test_a_run_started_by_an_earlier_version_resumes(tmp_path: Path) -> None:
    first = run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student="oracle", out=tmp_path,
                          task_ids=["hello-file"]))
    written = json.loads((tmp_path / "config.json").read_text())
    flat = {k: v for k, v in written.items() if k not in ("agent", "sandbox")}
    flat.update(sandbox="local", max_turns=40, command_timeout_s=60.0, max_wall_s=None, max_cost_usd=None,
                price_in_per_mtok=0.0, price_out_per_mtok=0.0)
    (tmp_path / "config.json").write_text(json.dumps(flat))  # as the flat RunConfig wrote it
    again = run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student="oracle", out=tmp_path,
                          task_ids=["hello-file"]))
    assert again.per_task == first.per_task == {"hello-file": 1.0}


@needs_bwrap
def test_every_setting_from_a_toml_file_and_flags_win(tmp_path: Path) -> None:
    config_file = tmp_path / "run.toml"
    config_file.write_text(f'student = "oracle"\ndata = "{HARBOR_EXAMPLES}"\ntask_ids = ["hello-file", "csv-total"]\n'
                           f'out = "{tmp_path / "from-file"}"\nbudget = 2\n'
                           '[agent]\nmax_turns = 9\nmax_wall_s = 120.0\n[sandbox]\ncommand_timeout_s = 12.5\n')
    out = tmp_path / "from-flags"
    result = CliRunner().invoke(app, ["run", "harbor", "--config", str(config_file), "--out", str(out),
                                      "--max-turns", "11"])
    assert result.exit_code == 0, result.output
    config = RunConfig.model_validate_json((out / "config.json").read_text())
    assert config.task_ids == ["hello-file", "csv-total"] and config.budget == 2 and config.data == HARBOR_EXAMPLES
    assert config.agent == AgentConfig(max_turns=11, max_wall_s=120.0)
    assert config.sandbox == SandboxSettings(kind="local", command_timeout_s=12.5)
    assert not (tmp_path / "from-file").exists()


def test_bad_settings_are_one_line_naming_the_flag_or_the_file_and_key(tmp_path: Path) -> None:
    def invoke(*argv: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, ["run", "harbor", *argv])
        return result.exit_code, result.output

    out = str(tmp_path / "r")
    assert invoke("--out", out) == (2, "error: --student: Field required\n")
    assert invoke("--student", "oracle", "--out", out, "--sandbox", "vm") == (
        2, "error: --sandbox: Input should be 'local', 'docker' or 'none'\n")
    assert invoke("--student", "oracle", "--out", out, "--trials", "0") == (
        2, "error: --trials: Input should be greater than or equal to 1\n")
    bad = tmp_path / "bad.toml"
    bad.write_text('student = "oracle"\n[agent]\nmax_turns = "many"\n')
    assert invoke("--config", str(bad), "--out", out) == (
        2, f"error: {bad}: agent.max_turns: Input should be a valid integer, unable to parse string as an integer\n")
    broken = tmp_path / "broken.toml"
    broken.write_text("student = \n")
    code, output = invoke("--config", str(broken), "--out", out)
    assert code == 2 and output.startswith(f"error: {broken}: invalid TOML: ")
    assert not (tmp_path / "r").exists()


def test_exec_and_compile_k_share_the_typed_sandbox_kind() -> None:
    for command in (["exec", "--sandbox", "vm", "--", "true"], ["compile-k", "x", "--out", "y", "--sandbox", "vm"]):
        result = CliRunner().invoke(app, command)
        assert (result.exit_code, result.output) == (2, "error: --sandbox: unknown kind 'vm'; use local, docker or "
                                                        "none\n")




def test_the_documented_example_is_a_valid_config() -> None:
    import re
    import tomllib

    from tests.helpers import ROOT

    block = re.search(r"```toml\n(.*?)```", (ROOT / "docs" / "run.md").read_text(), re.S)
    assert block is not None
    config = RunConfig.model_validate({**tomllib.loads(block.group(1)), "suite": "harbor", "out": "runs/x"})
    assert config.sandbox == SandboxSettings(kind="docker", command_timeout_s=120.0)
    assert config.agent.max_turns == 60 and config.trials == 3


def test_no_finish_checks_gives_the_run_its_bank_as_rescue_training_meets_it(tmp_path: Path) -> None:
    from unscaffold.benchmarks import load_suite
    from unscaffold.errors import InputError
    from unscaffold.run.runner import check_run_dir
    from unscaffold.run.setup import trial_context

    suite = load_suite("appworld_lite")
    checked = trial_context(suite, RunConfig(suite="appworld_lite", student="oracle", out=Path("x"), harness="hstar"))
    unchecked = trial_context(suite, RunConfig(suite="appworld_lite", student="oracle", out=Path("x"),
                                               harness="hstar", finish_checks=False))
    assert checked.harness.finish_checks is True and unchecked.harness.finish_checks is False
    # a run folder holds one run: resuming it with the other setting is refused
    check_run_dir(RunConfig(suite="appworld_lite", student="oracle", out=tmp_path, harness="hstar"))
    try:
        check_run_dir(RunConfig(suite="appworld_lite", student="oracle", out=tmp_path, harness="hstar",
                                finish_checks=False))
    except InputError as e:
        assert str(e) == (f"{tmp_path / 'config.json'}: finish_checks: the run in {tmp_path} was started with "
                          "other settings (finish_checks); use another --out")
    else:
        raise AssertionError("resumed with other finish checks")
