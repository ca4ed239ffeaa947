"""The reviewers: rules (recipes from K), cascade (call savings), LLM (K inline vs tools, retries), registry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests import reviewer_helpers as rv
from unscaffold.errors import InputError
from unscaffold.llm.registry import load_provider
from unscaffold.llm.types import AssistantResponse, Message, ToolCall, Usage
from unscaffold.minimal_harness.agent import Agent
from unscaffold.minimal_harness.sandbox import SandboxConfig
from unscaffold.minimal_harness.sandbox.none import UnisolatedSandbox
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.reviewer import ReviewHook, load_reviewer
from unscaffold.reviewer.base import ReviewRequest
from unscaffold.reviewer.cascade import CascadeFactory, writes_files
from unscaffold.reviewer.ktools import KTools
from unscaffold.reviewer.llm import LLMReviewer, LLMReviewerFactory
from unscaffold.reviewer.passthrough import PassthroughReviewer
from unscaffold.reviewer.replay_reviewer import ReplayReviewerFactory
from unscaffold.reviewer.rules import RulesReviewer

# --- rules -------------------------------------------------------------------------------------------------


def test_rules_replaces_an_unchecked_finish_with_the_recipe(tmp_path: Path) -> None:
    k = rv.write_k(tmp_path / "k")
    hook = ReviewHook(load_reviewer("rules").for_trial("t1"), k, 5, tmp_path / "reviews.jsonl", "t1-0", "t1")
    prop = rv.proposal(content="All done.")
    out = hook(rv.transcript(rv.TASK, "ls output"), prop)
    command = """python3 check.py '{"mode": "strict", "path": "output/answer.xlsx"}'"""
    assert command == k.recipes["answer-check"].command({"path": "output/answer.xlsx", "mode": "strict"})
    assert out.tool_calls[0].arguments == {"command": command} and out.tool_calls[0].id == "call_2"
    assert out.reasoning == "Before I finish I will check the answer workbook." and out.content is None
    assert (hook.stats.calls, hook.stats.replacements, hook.stats.reviews) == (0, 1, 1)
    [line] = rv.read_log(tmp_path / "reviews.jsonl")
    assert line["reason"] == rv.FINISH_INSTRUCTION
    assert line["components_used"] == ["check:finish-guard", "tool:answer-check"]
    assert (line["calls"], line["tries"], line["errors"]) == (0, 1, [])


def test_rules_passes_without_hint_or_when_extraction_fails(tmp_path: Path) -> None:
    k = rv.write_k(tmp_path / "k")
    reviewer = RulesReviewer()
    hook = ReviewHook(reviewer, k, 5, tmp_path / "reviews.jsonl", "t1-0", "t1")
    checked = rv.proposal(content="done")
    assert hook(rv.transcript(rv.TASK, "python3 check.py x"), checked) is checked  # the check already ran: no hint
    no_path = rv.proposal(content="done")
    assert hook(rv.transcript("Fill the totals.", "ls"), no_path) is no_path  # hint fires, `extract` finds nothing
    cmd = rv.proposal("ls")
    assert hook(rv.transcript(rv.TASK), cmd) is cmd
    assert [x["reason"] for x in rv.read_log(tmp_path / "reviews.jsonl")] == [
        "no check fired",
        "checks fired without an applicable remedy: check:finish-guard",
        "no check fired",
    ]
    assert (hook.stats.replacements, hook.stats.calls) == (0, 0)


# --- cascade -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command,writes",
    [
        ("ls -la", False), ("cat a.txt | head -5", False), ("grep -r x . 2>/dev/null", False),
        ("python3 run.py 2>&1 | tail", False), ("python3 -c 'print(1 if 2 >= 1 else 0)'", False),
        ("sed -n 1,5p f", False), ("python3 -c \"print(open('a').read())\"", False), ("echo hi >&2", False),
        ("echo hi > out.txt", True), ("echo hi >> log", True), ("cmd 2> err.log", True), ("ls | tee l.txt", True),
        ("cp a b", True), ("mv a b", True), ("rm -f a", True), ("mkdir -p out", True), ("touch f", True),
        ("sed -i 's/a/b/' f", True), ("python3 -c \"open('a', 'w').write('x')\"", True),
        ("python3 -c \"open(p, mode='a')\"", True), ("python3 -c 'wb.save(\"o.xlsx\")'", True),
        ("python3 -c 'df.to_csv(\"o.csv\")'", True), ("python3 -c 'df.to_excel(p)'", True),
        ("cat > f.py <<'EOF'\nprint(1)\nEOF", True),
    ],
)
def test_writes_files(command: str, writes: bool) -> None:
    assert writes_files(command) is writes


def test_cascade_calls_only_on_writes_and_finish(tmp_path: Path) -> None:
    steps = [
        {"tool_call": rv.exec_call("ls")},
        {"tool_call": rv.exec_call("cat notes.txt 2>&1")},
        {"tool_call": rv.exec_call("echo 42 > answer.txt")},
        {"tool_call": rv.exec_call("grep -c 4 answer.txt 2>/dev/null")},
        {"tool_call": rv.exec_call("python3 -c \"open('log.txt', 'a').write('x')\"")},
        {"content": "The answer is 42."},
    ]
    student = rv.write_replay(tmp_path / "student.json", steps)
    spec = "cascade:" + rv.write_replay(tmp_path / "reviewer.json", [rv.passes(), rv.passes(), rv.passes("supported")])
    factory = load_reviewer(spec)
    assert isinstance(factory, CascadeFactory)
    reviewer = factory.for_trial("t1")
    hook = ReviewHook(reviewer, None, 5, tmp_path / "reviews.jsonl", "t1-0", "t1")
    traj = Trajectory(trial_id="t1-0", task_id="t1", suite="unit", student=student, tools=[])
    Agent(load_provider(student).for_trial("t1"), UnisolatedSandbox(SandboxConfig(kind="none", workspace=tmp_path)),
          traj, review_hook=hook).run("find the answer")
    assert traj.exit_status == "submitted" and len(traj.steps) == 6
    assert (hook.stats.reviews, hook.stats.calls, hook.stats.saved_calls) == (6, 3, 3)
    assert reviewer.inner.cursor.position == 3
    lines = rv.read_log(tmp_path / "reviews.jsonl")
    assert [x["calls"] for x in lines] == [0, 0, 1, 0, 1, 1]
    assert lines[0]["skipped"] == "cascade: no hint, no finish, no file write"


def test_cascade_reviews_a_flagged_read_only_step(tmp_path: Path) -> None:
    k = rv.write_k(tmp_path / "k")
    k.middleware[0].rule.when = "command"  # now the finish guard flags any command lacking a prior check
    spec = "cascade:" + rv.write_replay(tmp_path / "reviewer.json", [rv.passes()])
    hook = ReviewHook(load_reviewer(spec).for_trial("t1"), k, 5, tmp_path / "reviews.jsonl", "t1-0", "t1")
    hook(rv.transcript(rv.TASK), rv.proposal("ls"))
    assert (hook.stats.calls, hook.stats.saved_calls) == (1, 0)


# --- LLM reviewer ------------------------------------------------------------------------------------------


class ScriptedModel:
    """Answers with the scripted responses in order and records what it was sent."""

    spec = "scripted"

    def __init__(self, responses: list[AssistantResponse]) -> None:
        self.responses, self.sent = list(responses), []

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> AssistantResponse:
        self.sent.append((list(messages), [t["function"]["name"] for t in tools]))
        return self.responses.pop(0)


def submit(call_id: str, arguments: dict[str, Any] | None, raw: str | None = None) -> AssistantResponse:
    return AssistantResponse(tool_calls=[ToolCall(id=call_id, name="submit_review", arguments=arguments,
                                                  raw_arguments=raw)], usage=Usage(input_tokens=100, output_tokens=10))


def look(call_id: str, name: str, **arguments: Any) -> AssistantResponse:
    return AssistantResponse(tool_calls=[ToolCall(id=call_id, name=name, arguments=arguments)],
                             usage=Usage(input_tokens=50, output_tokens=5))


def llm_hook(tmp_path: Path, model: ScriptedModel, k) -> ReviewHook:
    return ReviewHook(LLMReviewer(model), k, 5, tmp_path / "reviews.jsonl", "t1-0", "t1")


def test_llm_reviewer_reads_k_retries_and_replaces(tmp_path: Path) -> None:
    k = rv.write_k(tmp_path / "k", pad_chars=30_000)
    model = ScriptedModel([
        look("r1", "read", path="memory/notes.md"),
        submit("s1", {"decision": "REPLACE", "reason": "finish unsupported"}),
        submit("s2", rv.replace_with("python3 check.py x", reason="finish unsupported",
                                  components_used=["check:finish-guard"])),
    ])
    hook = llm_hook(tmp_path, model, k)
    prop = rv.proposal(content="All done.")
    out = hook(rv.transcript(rv.TASK, "ls output"), prop)
    assert out.tool_calls[0].arguments == {"command": "python3 check.py x"}
    assert (hook.stats.calls, hook.stats.invalid, hook.stats.replacements) == (3, 1, 1)
    assert hook.stats.usage == Usage(input_tokens=250, output_tokens=25)
    assert model.sent[0][1] == ["submit_review", "ls", "read", "grep"]
    system, user = model.sent[0][0][0].content, model.sent[0][0][1].content
    assert system.startswith("You review a spreadsheet student.")
    assert "x" * 1000 not in system and "NOTE-LITERALS" not in system and "memory:notes: memory/notes.md" in system
    assert "## Task\nFill the totals." in user and "Command (execute):\n```bash\nls output\n```" in user
    assert "(no tool call: this reply ends the episode" in user
    evidence = "the proposal ends the episode; no earlier command of the student matches /check\\.py/"
    assert f"- check:finish-guard / {evidence} / {rv.FINISH_INSTRUCTION}" in user
    second = model.sent[1][0]
    assert (second[-1].role, second[-1].tool_call_id) == ("tool", "r1")
    assert second[-1].content == "NOTE-LITERALS: write literal values, not formulas as strings."
    third = model.sent[2][0]
    assert (third[-1].role, third[-1].tool_call_id) == ("tool", "s1")
    assert third[-1].content == ("Invalid submission: REPLACE needs a replacement. "
                                 "Correct it and call `submit_review` again.")
    [line] = rv.read_log(tmp_path / "reviews.jsonl")
    assert (line["calls"], line["tries"], line["errors"]) == (3, 2, ["REPLACE needs a replacement"])


def test_llm_reviewer_inlines_a_small_k(tmp_path: Path) -> None:
    k = rv.write_k(tmp_path / "k")
    assert k.text_size() <= 24_000
    model = ScriptedModel([submit("s1", rv.passes())])
    hook = llm_hook(tmp_path, model, k)
    prop = rv.proposal("ls")
    assert hook(rv.transcript(), prop) is prop
    messages, tools = model.sent[0]
    assert tools == ["submit_review"]
    assert "=== memory/notes.md ===\nNOTE-LITERALS" in messages[0].content
    assert "=== reviewer_prompt.md ===" not in messages[0].content
    assert hook.stats.calls == 1


def test_llm_reviewer_without_k_uses_the_default_rules(tmp_path: Path) -> None:
    model = ScriptedModel([AssistantResponse(content='```json\n{"decision": "PASS", "reason": "fine"}\n```')])
    hook = llm_hook(tmp_path, model, None)
    prop = rv.proposal("ls")
    assert hook(rv.transcript(), prop) is prop
    system = model.sent[0][0][0].content
    assert "REPLACE only for a real correction" in system and "never mention the reviewer" in system.lower()
    assert hook.stats.calls == 1


def test_llm_reviewer_text_reply_error_goes_back_as_user_message(tmp_path: Path) -> None:
    model = ScriptedModel([AssistantResponse(content="Looks fine to me."), submit("s1", None, raw='{"decision": '),
                           submit("s2", rv.passes())])
    hook = llm_hook(tmp_path, model, None)
    hook(rv.transcript(), rv.proposal("ls"))
    assert model.sent[1][0][-1] == Message(role="user", content="Invalid submission: submission is not valid JSON: "
                                           "Expecting value. Correct it and call `submit_review` again.")
    assert model.sent[2][0][-1].content.startswith("Invalid submission: submission is not valid JSON: Expecting value")
    assert model.sent[2][0][-1].tool_call_id == "s1"
    assert (hook.stats.calls, hook.stats.invalid) == (3, 2)


def test_llm_reviewer_look_ups_are_capped_and_confined(tmp_path: Path) -> None:
    k = rv.write_k(tmp_path / "k", pad_chars=30_000)
    (tmp_path / "secret.txt").write_text("GOLD ANSWER")
    model = ScriptedModel([look(f"l{i}", "read", path="../secret.txt") for i in range(9)] + [submit("s", rv.passes())])
    reviewer = LLMReviewer(model)
    session = reviewer.open(ReviewRequest("t1-0", "t1", 1, rv.transcript(), rv.proposal("ls"), [], k))
    raw = session.next(None)
    assert raw is not None and raw.calls == 10 and raw.payload == rv.passes()
    results = [m.content for m in model.sent[-1][0] if m.role == "tool"]
    assert results[:8] == ["error: path '../secret.txt' leaves the reference"] * 8
    assert results[8] == "error: the limit of 8 look-ups is spent; call `submit_review` now"
    assert model.sent[-1][1] == ["submit_review"]


def test_k_tools(tmp_path: Path) -> None:
    tools = KTools(rv.write_k(tmp_path / "k"))
    assert tools.call("ls", {"path": "checks"}).splitlines() == [
        f"checks/finish-guard.json  ({(tmp_path / 'k/checks/finish-guard.json').stat().st_size} bytes)",
        f"checks/finish-guard.md  ({(tmp_path / 'k/checks/finish-guard.md').stat().st_size} bytes)",
    ]
    assert tools.call("grep", {"pattern": "literal"}) == (
        "memory/notes.md:1: NOTE-LITERALS: write literal values, not formulas as strings.")
    absolute = tools.call("read", {"path": "/etc/passwd"})
    assert absolute == "error: path '/etc/passwd' must be relative to the reference root"
    assert tools.call("read", {"path": "tools"}) == "error: 'tools' is a folder; use ls"
    assert tools.call("read", {"path": "nope.md"}) == "error: path 'nope.md' not found"
    small = KTools(rv.write_k(tmp_path / "k2"), max_output=10)
    assert small.call("read", {"path": "memory/notes.md"}) == (
        "NOTE-LITER\n[... 51 more characters; read again with offset=10]")
    assert small.call("read", {"path": "memory/notes.md", "offset": 54}) == "trings."


def test_k_grep_is_bounded_and_refuses_what_re2_cannot_compile(tmp_path: Path) -> None:
    k = rv.write_k(tmp_path / "k")
    (tmp_path / "k" / "memory" / "long.md").write_text("a" * 100_000 + "!\nab cd\n")
    tools = KTools(k)
    # Catastrophic for a backtracking engine on the 100,000-character line; RE2 answers at once.
    assert tools.call("grep", {"pattern": r"^(\w+\s?)*$", "path": "memory"}) == "memory/long.md:2: ab cd"
    assert tools.call("grep", {"pattern": r"(a)\1"}) == (
        "error: `pattern` is not a regular expression RE2 accepts (no backreferences or lookaround): "
        "invalid escape sequence: \\1")
    assert tools.call("grep", {"pattern": "(?=NOTE)"}) == (
        "error: `pattern` is not a regular expression RE2 accepts (no backreferences or lookaround): "
        "invalid perl operator: (?=")
    assert tools.call("grep", {"pattern": "note-(literal"}) == (
        "error: `pattern` is not a regular expression RE2 accepts (no backreferences or lookaround): "
        "missing ): note-(literal")
    assert tools.call("grep", {"pattern": "\udfff"}) == (
        "error: `pattern` cannot be encoded as UTF-8 (it holds a lone surrogate)")
    assert tools.call("grep", {"pattern": "x" * 1001}) == (
        "error: `pattern` is 1001 characters, over the limit of 1000")
    assert tools.call("grep", {"pattern": "NOTE-LIT.RALS"}) == (
        "memory/notes.md:1: NOTE-LITERALS: write literal values, not formulas as strings.")


# --- registry ----------------------------------------------------------------------------------------------


def test_load_reviewer_specs(tmp_path: Path) -> None:
    assert isinstance(load_reviewer("passthrough").for_trial("a"), PassthroughReviewer)
    assert isinstance(load_reviewer("rules").for_trial("a"), RulesReviewer)
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"*": [rv.passes(), "raw text"]}))
    replay = load_reviewer(f"replay:{path}")
    assert isinstance(replay, ReplayReviewerFactory)
    a, b = replay.for_trial("x"), replay.for_trial("y")
    assert a.cursor is not b.cursor  # each trial walks the entries on its own
    llm = load_reviewer("openai:some-model@http://127.0.0.1:9")
    assert isinstance(llm, LLMReviewerFactory) and isinstance(llm.for_trial("x"), LLMReviewer)
    cascade = load_reviewer(f"cascade:replay:{path}")
    assert cascade.spec == f"cascade:replay:{path}"


@pytest.mark.parametrize("spec", ["bogus", "cascade:", "cascade:cascade:rules", "replay:", "gemini:x"])
def test_load_reviewer_rejects_unknown_specs(spec: str) -> None:
    with pytest.raises(InputError) as e:
        load_reviewer(spec)
    assert str(e.value).startswith("--reviewer: ")


def test_replay_entries_must_be_objects_or_strings(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"t1": [rv.passes(), 3]}))
    with pytest.raises(InputError) as e:
        load_reviewer(f"replay:{path}")
    assert str(e.value) == f"{path}: t1[1]: expected an object or a string"
    path.write_text(json.dumps({"t1": ["raw text"]}))
    with pytest.raises(InputError) as e:
        load_provider(f"replay:{path}")
    assert str(e.value) == f"{path}: t1[0]: expected an object"
