"""h* banks, the compiler h* -> K, K validation and lint, and a student running under h*."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import EXAMPLES, HARBOR_EXAMPLES, assert_k_current, call, final, needs_bwrap
from unscaffold.benchmarks import load_suite
from unscaffold.errors import InputError
from unscaffold.knowledge.bank import load_bank
from unscaffold.knowledge.compiler import compile_k, lint_k
from unscaffold.knowledge.hstar import HStarHarness
from unscaffold.knowledge.kfolder import load_k
from unscaffold.knowledge.middleware import Middleware, evaluate, triggered
from unscaffold.llm.registry import load_provider
from unscaffold.llm.types import AssistantResponse, Message, ToolCall
from unscaffold.minimal_harness.agent import Agent
from unscaffold.minimal_harness.sandbox import SandboxConfig, open_sandbox
from unscaffold.minimal_harness.trajectory import Trajectory

BANK = EXAMPLES / "hstar" / "harbor_bank"
SHIPPED_K = EXAMPLES / "hstar" / "harbor_k"


@pytest.fixture
def bank(tmp_path: Path) -> Path:
    copy = tmp_path / "bank"
    shutil.copytree(BANK, copy)
    return copy


def edit_manifest(bank: Path, old: str, new: str) -> None:
    manifest = bank / "manifest.toml"
    text = manifest.read_text()
    assert old in text
    manifest.write_text(text.replace(old, new, 1))


def test_bank_loads_with_memory_sections() -> None:
    bank = load_bank(BANK)
    assert [t.name for t in bank.manifest.tools] == ["show_file", "column_totals"]
    assert [c.hook for c in bank.manifest.checks] == ["before_command", "before_finish", "after_command"]
    rule = bank.memory_rules[1]
    assert rule.name == "tie-order"
    assert rule.intervention.startswith("sort by (-count, name)")


@pytest.mark.parametrize(
    "old,new,field,problem",
    [
        ('script = "tools/show_file.py"', 'script = "tools/nope.py"', "tools.0.script",
         "file 'tools/nope.py' not found"),
        ('script = "tools/show_file.py"', 'script = "../../etc/passwd"', "tools.0.script",
         "path '../../etc/passwd' leaves the bank"),
        ('hook = "before_command"', 'hook = "sometimes"', "checks.0.hook",
         "Input should be 'before_command', 'after_command' or 'before_finish'"),
        ('tool = "show_file"', 'tool = "grep_all"', "checks.1.transcript_rule.remedy.tool", "unknown tool 'grep_all'"),
        ("command_matches = '(?:^|", "command_matches = '((?:^|", "checks.0.transcript_rule.command_matches",
         "Value error, invalid regular expression: missing ), unterminated subpattern at position 0"),
    ],
)
def test_bank_errors_name_file_and_field(bank: Path, old: str, new: str, field: str, problem: str) -> None:
    edit_manifest(bank, old, new)
    with pytest.raises(InputError) as err:
        load_bank(bank)
    assert str(err.value) == f"{bank / 'manifest.toml'}: {field}: {problem}"


def test_memory_file_missing_a_section(bank: Path) -> None:
    (bank / "memory" / "off-by-one.md").write_text("Trigger: x\nEvidence: y\nIntervention: z\n")
    with pytest.raises(InputError) as err:
        load_bank(bank)
    assert str(err.value) == (f"{(bank / 'memory' / 'off-by-one.md').resolve()}: Do not trigger: missing section "
                              "(memory rules need Trigger, Evidence, Intervention, Do not trigger)")


@needs_bwrap
def test_compile_k_writes_recipes_middleware_skills_memory_index(bank: Path, tmp_path: Path) -> None:
    report = compile_k(bank, tmp_path / "K")
    k = load_k(tmp_path / "K")
    assert k.component_ids() == [
        "tool:show_file", "tool:column_totals", "check:bounded_commands", "check:show_before_finish",
        "check:repeated_error", "skill:inspect-first", "skill:verify", "memory:off-by-one", "memory:tie-order",
    ]
    assert [(c.tool, c.example, c.same_output, c.same_files) for c in report.recipe_checks] == [
        ("show_file", 0, True, True), ("show_file", 1, True, True), ("column_totals", 0, True, True)]
    assert "## tie-order" in (tmp_path / "K" / "memory.md").read_text()
    assert "`check:show_before_finish`" in k.reviewer_prompt
    assert k.recipes["show_file"].command({"path": "a.txt"}).startswith(
        "python3 - '{\"path\": \"a.txt\"}' <<'UNSCAFFOLD_RECIPE'\nimport json")


@needs_bwrap
def test_shipped_k_is_current(tmp_path: Path) -> None:
    assert_k_current(BANK, SHIPPED_K, tmp_path)


@needs_bwrap
def test_recipe_that_needs_the_bank_fails_equivalence(bank: Path, tmp_path: Path) -> None:
    (bank / "tools" / "helper.txt").write_text("from the bank\n")
    script = bank / "tools" / "show_file.py"
    script.write_text("import pathlib\nprint(pathlib.Path('/hstar/tools/helper.txt').exists())\n")
    with pytest.raises(InputError) as err:
        compile_k(bank, tmp_path / "K")
    assert str(err.value) == (
        f"{bank.resolve() / 'manifest.toml'}: tools.show_file.examples.0: the recipe's output differs from the "
        "tool's: tool gave 'True\\n\\n[exit_code=0]', recipe gave 'False\\n\\n[exit_code=0]'")
    assert not (tmp_path / "K").exists()


def test_an_unknown_example_suite_is_a_compile_error(bank: Path, tmp_path: Path) -> None:
    edit_manifest(bank, 'name = "harbor-examples"\n', 'name = "harbor-examples"\nexample_suite = "nope"\n')
    with pytest.raises(InputError) as err:
        compile_k(bank, tmp_path / "K")
    assert str(err.value).startswith(f"{bank.resolve() / 'manifest.toml'}: example_suite: unknown suite 'nope'; "
                                     "known: appworld, appworld_lite,")
    assert not (tmp_path / "K").exists()


def test_check_without_transcript_rule_is_a_compile_error(bank: Path, tmp_path: Path) -> None:
    text = (bank / "manifest.toml").read_text()
    start = text.index("[checks.transcript_rule]\nwhen = \"command\"\ncommand_matches")
    end = text.index("[[checks]]", start)
    (bank / "manifest.toml").write_text(text[:start] + text[end:])
    with pytest.raises(InputError) as err:
        compile_k(bank, tmp_path / "K", verify=False)
    assert str(err.value) == (f"{bank.resolve() / 'manifest.toml'}: checks.0.transcript_rule: check "
                              "'bounded_commands' has no transcript_rule, so it cannot become review middleware "
                              "(a check is never dropped silently)")


def test_k_validation_errors(tmp_path: Path) -> None:
    k_dir = tmp_path / "K"
    shutil.copytree(SHIPPED_K, k_dir)
    index = json.loads((k_dir / "index.json").read_text())
    index["components"][0]["path"] = "../outside.md"
    (k_dir / "index.json").write_text(json.dumps(index))
    with pytest.raises(InputError) as err:
        load_k(k_dir)
    assert str(err.value) == f"{k_dir / 'index.json'}: components.0.path: path '../outside.md' leaves K"
    index["components"][0]["path"] = "recipes/gone.md"
    (k_dir / "index.json").write_text(json.dumps(index))
    with pytest.raises(InputError, match="components.0.path: file 'recipes/gone.md' not found"):
        load_k(k_dir)
    index["components"][0]["path"] = "recipes/show_file.md"
    index["components"][1]["id"] = "tool:show_file"
    (k_dir / "index.json").write_text(json.dumps(index))
    with pytest.raises(InputError, match="components.1.id: duplicate component id 'tool:show_file'"):
        load_k(k_dir)


def test_lint_finds_task_ids_and_gold_answers(tmp_path: Path) -> None:
    suite = load_suite("harbor", HARBOR_EXAMPLES)
    k_dir = tmp_path / "K"
    shutil.copytree(SHIPPED_K, k_dir)
    assert lint_k(load_k(k_dir), suite.leak_markers()) == []
    with open(k_dir / "memory.md", "a") as f:
        f.write("\nSeen in word-stats: the answer starts with the 6.\n")
        f.write("sed -i 's/range(n - 1)/range(n)/' /app/fib.py\n")
    assert lint_k(load_k(k_dir), suite.leak_markers()) == [
        "memory.md contains \"sed -i 's/range(n - 1)/range(n)/' /app/fib.py\"",
        "memory.md contains 'word-stats'",
    ]


def test_middleware_counts_only_the_students_own_commands() -> None:
    k = load_k(SHIPPED_K)
    finish = AssistantResponse(content="Done.")
    transcript = [
        Message(role="system", content="s"),
        Message(role="user", content="Write the answer to `/app/answer.txt`."),
        Message(role="assistant", tool_calls=[
            {"id": "1", "function": {"name": "execute", "arguments": {"command": "echo 4 > answer.txt"}}}]),
        Message(role="tool", tool_call_id="1", content="try: cat answer.txt\n[exit_code=0]"),
    ]
    hints = triggered(k.middleware, transcript, finish)
    assert [h.component_id for h in hints] == ["check:show_before_finish"]
    assert hints[0].evidence == ("the proposal ends the episode; no earlier command of the student matches "
                                 "/\\b(cat|head|tail|diff|cmp|wc|python3)\\b/")
    transcript[2].tool_calls[0].function.arguments = {"command": "echo 4 > answer.txt && cat answer.txt"}
    assert triggered(k.middleware, transcript, finish) == []


def test_repeated_error_middleware() -> None:
    k = load_k(SHIPPED_K)
    mw = next(m for m in k.middleware if m.component_id == "check:repeated_error")
    error = "cat: data.csv: No such file or directory\n[exit_code=1]"
    transcript = [Message(role="user", content="t")] + [Message(role="tool", content=error)] * 3
    hint = evaluate(mw, transcript, AssistantResponse(tool_calls=[ToolCall(id="c", name="execute",
                                                                           arguments={"command": "cat data.csv"})]))
    assert hint is not None
    assert hint.evidence == ("the error 'cat: data.csv: No such file or directory' appeared 3 times in the last "
                             "3 results")
    assert evaluate(mw, transcript[:3], AssistantResponse(tool_calls=[ToolCall(
        id="c", name="execute", arguments={"command": "ls"})])) is None
    assert isinstance(mw, Middleware)


@needs_bwrap
def test_student_under_hstar_gets_tools_checks_skills_memory(tmp_path: Path, write_replay) -> None:
    harness = HStarHarness(load_bank(BANK))
    spec = write_replay({"*": [
        {"tool_call": {"name": "show_file", "arguments": {"path": "data.txt"}}},
        call("tail -f data.txt"),
        final("done"),  # blocked: the workspace file exists but the check wants no empty files
        call("echo more >> data.txt"),
        final("done"),
    ]})
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.txt").write_text("")
    sandbox = open_sandbox(SandboxConfig(workspace=ws, workdir="/app", mounts=[harness.mount()]))
    traj = Trajectory(trial_id="t", task_id="t", suite="unit", student=spec, tools=[])
    Agent(load_provider(spec).for_trial("t"), sandbox, traj, harness=harness).run("work")
    sandbox.close()
    assert [t["function"]["name"] for t in traj.tools] == ["execute", "show_file", "column_totals"]
    system = traj.messages[0].content
    assert "- `show_file`: Print a text file" in system and "## Skill: verify" in system
    assert "### off-by-one\n- Trigger: a loop or range bound" in system
    tool_msgs = [m.content for m in traj.messages if m.role == "tool"]
    assert tool_msgs[0] == "[/app/data.txt: 0 bytes, 0 lines]\n\n[exit_code=0]".replace("/app/data.txt", "data.txt")
    assert tool_msgs[1] == ("[check bounded_commands] This command does not end on its own; use a bounded form "
                            "(head -n, a count, or timeout N).\n[the command was not run]\n[exit_code=126]")
    blocked = [m.content for m in traj.messages if m.role == "user"][1]
    assert blocked == ("[check show_before_finish] /app/data.txt is empty.\n"
                       "Continue working; finish again when this is resolved.")
    assert traj.exit_status == "submitted" and traj.harness == "hstar"
    assert (ws / "data.txt").read_text() == "more\n"


@needs_bwrap
def test_without_finish_checks_the_first_final_answer_ends_the_episode(tmp_path: Path, write_replay) -> None:
    """As a rescue-training rollout meets a bank (TRL's loop ends at the first reply without a tool call)."""
    harness = HStarHarness(load_bank(BANK), finish_checks=False)
    spec = write_replay({"*": [call("true"), final("done"), call("echo more >> data.txt"), final("done")]})
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.txt").write_text("")  # the show_before_finish check would block: the file is empty
    sandbox = open_sandbox(SandboxConfig(workspace=ws, workdir="/app", mounts=[harness.mount()]))
    traj = Trajectory(trial_id="t", task_id="t", suite="unit", student=spec, tools=[])
    Agent(load_provider(spec).for_trial("t"), sandbox, traj, harness=harness).run("work")
    sandbox.close()
    assert [m.role for m in traj.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert traj.exit_status == "submitted" and traj.final_answer == "done"
    assert (ws / "data.txt").read_text() == ""


def _traj_with(commands: list[str], tool: str | None = None) -> Trajectory:
    messages = [Message(role="user", content="t")]
    for i, command in enumerate(commands):
        messages.append(Message(role="assistant", tool_calls=[{"id": str(i), "function": {
            "name": "execute", "arguments": {"command": command}}}]))
        messages.append(Message(role="tool", tool_call_id=str(i), content="ok\n[exit_code=0]"))
    if tool:
        messages.append(Message(role="assistant", tool_calls=[{"id": "t", "function": {
            "name": tool, "arguments": {"path": "x"}}}]))
    return Trajectory(trial_id="t", task_id="t", suite="unit", student="s", tools=[], messages=messages)


@pytest.mark.parametrize(
    "commands,tool,expected",
    [
        (["echo 1 > out.txt", "cat out.txt"], None, True),
        (["echo 1 > out.txt && cat out.txt"], None, True),  # shown after the write, in the same command
        (["cat out.txt", "echo 1 > out.txt"], None, False),  # shown only before the last write
        (["echo 1 > out.txt 2>&1"], None, False),
        (["echo 1 > out.txt"], "show_file", True),  # under h* the tool call is the behaviour
    ],
)
def test_behaviour_detector_after_last_write(commands: list[str], tool: str | None, expected: bool) -> None:
    from unscaffold.behaviors.detector import detect

    spec = load_bank(BANK).detectors()["check:show_before_finish"]
    assert detect(spec, _traj_with(commands, tool)) is expected


def test_ordered_detector() -> None:
    from unscaffold.behaviors.detector import detect
    from unscaffold.detector_spec import DetectorSpec

    spec = DetectorSpec(description="inspect then write", commands=[r"\bhead\b", r">"], ordered=True)
    assert detect(spec, _traj_with(["head in.csv", "echo x > out"]))
    assert not detect(spec, _traj_with(["echo x > out", "head in.csv"]))


def test_stall_and_turn_budget_rules_and_detectors() -> None:
    from unscaffold.behaviors.detector import detect
    from unscaffold.detector_spec import DetectorSpec
    from unscaffold.knowledge.bank import TranscriptRule

    stall = Middleware(component_id="check:stall", rule=TranscriptRule(
        when="finish", content_matches=r"(?i)^\s*(?:I will|Let me)\b", instruction="Run the step."))
    transcript = [Message(role="user", content="t")]
    hint = evaluate(stall, transcript, AssistantResponse(content="Let me check the file next."))
    assert hint is not None and hint.evidence == ("the proposal ends the episode; the proposal's text matches "
                                                  "/(?i)^\\s*(?:I will|Let me)\\b/: Let me")
    assert evaluate(stall, transcript, AssistantResponse(content="The total is 42.")) is None
    budget = Middleware(component_id="check:turn_budget", rule=TranscriptRule(at_turns=[3], instruction="Hurry."))
    two_turns = transcript + [Message(role="assistant", content="a"), Message(role="assistant", content="b")]
    command = AssistantResponse(tool_calls=[ToolCall(id="c", name="execute", arguments={"command": "ls"})])
    assert evaluate(budget, two_turns, command).evidence == "this is turn 3 (budget notes at turns 3)"
    assert evaluate(budget, two_turns[:2], command) is None
    finished = _traj_with(["ls"])
    finished.exit_status, finished.final_answer = "submitted", "The answer is 4."
    finished.steps = [None] * 2  # two turns
    assert detect(DetectorSpec(description="d", final_answer_lacks=r"^Let me"), finished)
    assert detect(DetectorSpec(description="d", within_turns=2), finished)
    assert not detect(DetectorSpec(description="d", within_turns=1), finished)
    finished.final_answer = "Let me look again."
    assert not detect(DetectorSpec(description="d", final_answer_lacks=r"^Let me"), finished)
