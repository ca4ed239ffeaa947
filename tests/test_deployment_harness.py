"""h as the reference harness states it: the prompt's exact wording, 600 s a command, output cut only in the
app world (12,000 characters, head and tail). Any change to these moves every baseline and recovery figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import call, final
from unscaffold.llm.registry import load_provider
from unscaffold.minimal_harness.agent import Agent, AgentConfig
from unscaffold.minimal_harness.harness import MinimalHarness
from unscaffold.minimal_harness.sandbox import SandboxConfig
from unscaffold.minimal_harness.sandbox.base import DEFAULT_COMMAND_TIMEOUT_S, SandboxSettings
from unscaffold.minimal_harness.sandbox.none import UnisolatedSandbox
from unscaffold.minimal_harness.sandbox.output import cut_output
from unscaffold.minimal_harness.sandbox.result import ExecResult
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.run.models import RunConfig
from unscaffold.run.trial import output_cut
from unscaffold.suites import find, names

REFERENCE_PROMPT = """\
You are an autonomous agent working on a task in a Linux workspace.

You have exactly one tool, `execute`, which runs one bash command and returns its output followed by \
`[exit_code=N]`.
- Each call runs in a fresh shell: files you write persist, but the working directory and environment \
variables do not. Every command starts in the workspace root.
- Make one tool call at a time, with one non-empty command.

When the task is done, reply with a short final answer and no tool call. That reply ends the episode."""

# characters of output the student sees in the app world, as the reference harness; every other suite: whole
APP_WORLD_CUT = {"appworld_lite": 12_000, "appworld": 12_000}


def suite_class(name: str) -> type:
    return find(name).suite_class()


def test_the_system_prompt_states_the_protocol_only() -> None:
    prompt = MinimalHarness().system_prompt()
    assert prompt == REFERENCE_PROMPT
    for nudge in ("check", "step by step", "bounded", "verify", "inspect"):
        assert nudge not in prompt.lower()


def test_a_command_may_run_600_seconds_by_default(tmp_path: Path) -> None:
    assert DEFAULT_COMMAND_TIMEOUT_S == 600.0
    assert SandboxSettings().command_timeout_s == 600.0
    assert RunConfig(suite="spreadsheet", student="oracle", out=tmp_path).sandbox.command_timeout_s == 600.0


def test_output_is_cut_only_in_the_app_world(tmp_path: Path) -> None:
    assert set(APP_WORLD_CUT) < set(names())
    for name in names():
        cut = APP_WORLD_CUT.get(name)
        config = RunConfig(suite=name, student="oracle", out=tmp_path)
        assert suite_class(name).output_cut_chars == cut, name
        assert output_cut(suite_class(name), config) == cut, name


def test_the_run_option_overrides_the_suite_cut(tmp_path: Path) -> None:
    lite, sheets = suite_class("appworld_lite"), suite_class("spreadsheet")
    never = RunConfig(suite="appworld_lite", student="oracle", out=tmp_path, agent=AgentConfig(output_cut_chars=0))
    assert output_cut(lite, never) is None
    cut = RunConfig(suite="spreadsheet", student="oracle", out=tmp_path, agent=AgentConfig(output_cut_chars=100))
    assert output_cut(sheets, cut) == 100
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        AgentConfig(output_cut_chars=-1)


def test_cut_keeps_head_and_tail_around_a_count() -> None:
    text = "a" * 6_000 + "b" * 3_000 + "c" * 6_000
    assert cut_output(text, None) == text
    assert cut_output(text, 15_000) == text
    assert cut_output(text, 12_000) == "a" * 6_000 + "\n[... 3000 characters elided ...]\n" + "c" * 6_000
    assert cut_output("0123456789", 5) == "01\n[... 5 characters elided ...]\n789"


def test_cut_counts_what_the_collector_already_left_out() -> None:
    collected = "a" * 10 + "\n[... 500 characters elided ...]\n" + "c" * 10
    result = ExecResult(output=collected, exit_code=0, elided_chars=500)
    # 53 characters, 33 of them the collector's note: 4 + 5 kept, so 11 of the text and the 500 before are elided
    assert result.observation(9) == "aaaa\n[... 511 characters elided ...]\nccccc\n[exit_code=0]"
    assert result.observation() == collected + "\n[exit_code=0]"


def test_the_agent_applies_the_cut_where_it_forms_the_observation(tmp_path: Path, write_replay) -> None:
    spec = write_replay({"t1": [call("python3 -c \"print('x' * 20000, end='')\""), final("done")]})
    for cut, seen in ((12_000, "x" * 6_000 + "\n[... 8000 characters elided ...]\n" + "x" * 6_000),
                      (None, "x" * 20_000)):
        model = load_provider(spec).for_trial("t1")
        ws = tmp_path / f"ws{cut}"
        sandbox = UnisolatedSandbox(SandboxConfig(kind="none", workspace=ws))
        traj = Trajectory(trial_id="t1", task_id="t1", suite="unit", student=spec, tools=[])
        Agent(model, sandbox, traj, config=AgentConfig(output_cut_chars=cut)).run("print")
        assert traj.messages[3].content == seen + "\n[exit_code=0]"
