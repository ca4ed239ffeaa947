"""Hostile student programs against the behaviour detectors, which run on the host: a script that runs
itself, a program nested past the parser's stack, long string literals and a trial past the time bound
end in "not shown" with a note, never a crash or a stall."""

from __future__ import annotations

import pytest

from unscaffold.behaviors.detector import read_trial
from unscaffold.behaviors.program import MAX_COMMAND_CHARS, MAX_SCRIPT_DEPTH, MAX_TREE_DEPTH, parse_python
from unscaffold.knowledge.bank import load_bank
from unscaffold.llm.types import Message
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.suites import find

RETRO = load_bank(find("retrosynthesis").bank).detectors()
CHECK = "python3 -c \"from rdkit import Chem; print(Chem.MolFromSmiles(open('answer.txt').read()))\""
WRITE = "echo CCO > answer.txt"


def trajectory(*commands: str) -> Trajectory:
    messages = [Message(role="user", content="task")]
    for i, command in enumerate(commands):
        messages.append(Message(role="assistant", tool_calls=[{"id": str(i), "function": {
            "name": "execute", "arguments": {"command": command}}}]))
        messages.append(Message(role="tool", tool_call_id=str(i), content="ok\n[exit_code=0]"))
    return Trajectory(trial_id="t", task_id="t", suite="unit", student="s", tools=[], messages=messages)


def test_a_script_that_runs_itself_is_read_to_a_bounded_depth() -> None:
    reading = read_trial(RETRO, trajectory("cat > x.sh <<'EOF'\nbash x.sh\nEOF", "bash x.sh", WRITE, CHECK))
    assert reading.notes == [f"scripts run within scripts deeper than {MAX_SCRIPT_DEPTH} levels were not read"]
    assert reading.shows["check:answer_valid"] is True  # the rest of the trajectory is still read


def test_a_five_thousand_term_sum_is_not_read_and_noted() -> None:
    program = "x = " + "+".join(["1"] * 5000) + "\nfrom rdkit import Chem\n" \
              "Chem.MolFromSmiles(open('answer.txt').read())"
    assert parse_python(program) == (None, "a program nested too deeply to parse (RecursionError) was not read")
    reading = read_trial(RETRO, trajectory(WRITE, f"python3 - <<'EOF'\n{program}\nEOF"))
    assert reading.shows["check:answer_valid"] is False
    assert reading.notes == ["a program nested too deeply to parse (RecursionError) was not read"]


def test_a_tree_deeper_than_the_bound_is_not_read() -> None:
    """A 900-term sum parses, but the analysis walks expressions recursively: past the bound it is not read."""
    assert parse_python("x = " + "+".join(["1"] * 900)) == (
        None, f"a program nested deeper than {MAX_TREE_DEPTH} levels was not read")
    assert parse_python("x = " + "[" * 160 + "]" * 160)[1] == \
        f"a program nested deeper than {MAX_TREE_DEPTH} levels was not read"
    assert parse_python("x = " + "[" * 100 + "]" * 100)[1] is None


def test_a_command_over_the_size_bound_is_not_read() -> None:
    big = f"python3 - <<'EOF'\nx = '{'a' * MAX_COMMAND_CHARS}'\nfrom rdkit import Chem\n" \
          "Chem.MolFromSmiles(open('answer.txt').read())\nEOF"
    reading = read_trial(RETRO, trajectory(WRITE, big))
    assert reading.shows["check:answer_valid"] is False
    assert reading.notes == [f"a command of {len(big):,} characters (over {MAX_COMMAND_CHARS:,}) was not read"]


def test_two_long_literals_are_read_in_linear_time() -> None:
    """`$(cat ` repeated inside a 100 KB literal made the read-of-a-file search quadratic (minutes)."""
    program = ("from rdkit import Chem\na = '" + "$(cat " * 20_000 + "'\nb = '" + "x" * 100_000 + "'\n"
               "Chem.MolFromSmiles(a)\n")
    reading = read_trial(RETRO, trajectory(WRITE, f"python3 - <<'EOF'\n{program}EOF"), seconds=30)
    assert reading.notes == [] and reading.shows["check:answer_valid"] is False
    substituted = "from rdkit import Chem\nChem.MolFromSmiles('$(cat answer.txt)')\n"
    reading = read_trial(RETRO, trajectory(WRITE, f"python3 - <<EOF\n{substituted}EOF"))
    assert reading.shows["check:answer_valid"] is True


def test_a_trial_past_its_time_bound_counts_as_not_shown_and_is_noted() -> None:
    reading = read_trial(RETRO, trajectory(WRITE, CHECK), seconds=0)
    assert reading.shows == dict.fromkeys(RETRO, False)
    assert reading.notes == ["not analysed to the end (AnalysisTimeout: analysis ran past 5 s); the behaviours not "
                             "yet decided count as not shown"]


@pytest.mark.parametrize("command", [
    "python3 -c \"from rdkit import Chem\nChem.MolFromSmiles(open('answer.txt').read()\"",  # SyntaxError: never ran
    "# python3 -c \"from rdkit import Chem; Chem.MolFromSmiles(open('answer.txt').read())\"",
    "true # && python3 -c \"from rdkit import Chem; Chem.MolFromSmiles(open('answer.txt').read())\"",
])
def test_a_check_that_never_ran_shows_nothing(command: str) -> None:
    reading = read_trial(RETRO, trajectory(WRITE, command))
    assert (reading.shows["check:answer_valid"], reading.notes) == (False, [])


def test_timeout_zero_sets_no_limit() -> None:
    assert read_trial(RETRO, trajectory("timeout 0 python3 -c 'print(1)'")).shows["check:bounded_commands"] is False
    assert read_trial(RETRO, trajectory("timeout 30 python3 -c 'print(1)'")).shows["check:bounded_commands"] is True


def test_what_decides_each_behaviour_is_said_even_when_the_bound_cuts_the_reading() -> None:
    from unscaffold.minimal_harness.evidence import CommandEvidence

    evidence = [CommandEvidence(step=0, message_index=1, command=WRITE, exit_code=0, recorder="python-audit")]
    reading = read_trial(RETRO, trajectory(WRITE), evidence, seconds=0)
    assert (reading.kinds["check:answer_valid"], reading.kinds["check:bounded_commands"]) == ("evidence", "text")
    unrecorded = [evidence[0].model_copy(update={"recorder": "none"})]
    assert set(read_trial(RETRO, trajectory(WRITE), unrecorded).kinds.values()) == {"text"}


def test_shell_writes_come_from_the_text_when_the_recorder_could_not_see_them() -> None:
    """Under docker only Python is recorded (no preload library): `echo ... > answer.txt` is taken from the
    command's text, so a later RDKit parse of that content is still after the last write."""
    from unscaffold.minimal_harness.evidence import CommandEvidence

    parse = {"kind": "call", "seq": 1, "name": "rdkit.Chem.MolFromSmiles", "args": ["CCO"], "ok": True,
             "result": "<rdkit.Chem.rdchem.Mol>"}
    evidence = [CommandEvidence(step=0, message_index=1, command=WRITE, exit_code=0, recorder="python-audit"),
                CommandEvidence.model_validate({"step": 1, "message_index": 3, "command": CHECK, "exit_code": 0,
                                                "recorder": "python-audit", "events": [parse]})]
    reading = read_trial(RETRO, trajectory(WRITE, CHECK), evidence)
    assert (reading.shows["check:answer_valid"], reading.kinds["check:answer_valid"]) == (True, "evidence")
    later = read_trial(RETRO, trajectory(CHECK, "echo CCN > answer.txt"), [
        evidence[1].model_copy(update={"step": 0, "message_index": 1, "command": CHECK}),
        evidence[0].model_copy(update={"step": 1, "message_index": 3, "command": "echo CCN > answer.txt"})])
    assert later.shows["check:answer_valid"] is False  # the shell rewrote the answer after the parse
