"""Every behaviour detector of every shipped bank against its hand-written cases (detector_cases.toml
beside the bank's manifest): each must fire on its positive cases and stay silent on its negative ones,
and each must have at least three of each."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import EXAMPLES
from unscaffold.behaviors.cases import load_cases
from unscaffold.behaviors.detector import detect
from unscaffold.knowledge.bank import load_bank
from unscaffold.suites import entries

ROOT = Path(__file__).resolve().parent.parent
# each suite's own bank, with its detector cases beside it (the registry says where), and the example banks
BANKS = {**{e.name: e.bank for e in entries() if e.cases is not None and e.bank is not None},
         "harbor": EXAMPLES / "hstar" / "harbor_bank", "harbor_words": EXAMPLES / "hstar" / "words_bank"}
MINIMUM = 3


def test_every_shipped_bank_with_detectors_is_covered() -> None:
    """A bank that declares detectors must ship its cases: a suite's is found through the registry, an example
    bank must be listed here."""
    manifests = [*ROOT.glob("unscaffold/**/manifest.toml"), *ROOT.glob("examples/**/manifest.toml")]
    with_detectors = {m.parent.resolve() for m in manifests if "/k/" not in str(m) and load_bank(m.parent).detectors()}
    assert with_detectors == {p.resolve() for p in BANKS.values()}
    assert sorted(BANKS) == ["appworld_lite", "harbor", "harbor_words", "retrosynthesis", "spreadsheet"]


@pytest.mark.parametrize("bank", sorted(BANKS))
def test_every_detector_has_three_cases_of_each_kind(bank: str) -> None:
    detectors = load_bank(BANKS[bank]).detectors()
    cases = load_cases(BANKS[bank]).cases
    unknown = sorted({c.component for c in cases} - set(detectors))
    assert unknown == [], f"cases for components without a detector: {unknown}"
    counts = Counter((c.component, c.shows) for c in cases)
    short = [f"{cid} ({counts[cid, True]} positive, {counts[cid, False]} negative)" for cid in detectors
             if counts[cid, True] < MINIMUM or counts[cid, False] < MINIMUM]
    assert short == [], f"{bank}: detectors with fewer than {MINIMUM} cases of each kind: {short}"


@pytest.mark.parametrize("bank", sorted(BANKS))
def test_detectors_pass_their_cases(bank: str) -> None:
    detectors = load_bank(BANKS[bank]).detectors()
    cases = load_cases(BANKS[bank])
    wrong = [f"{c.component} {'missed' if c.shows else 'fired on'}: {c.why}" for c in cases.cases
             if detect(detectors[c.component], cases.trajectory(c), evidence=cases.evidence(c)) is not c.shows]
    assert wrong == []


@pytest.mark.parametrize("bank", sorted(BANKS))
def test_recorded_cases_are_decided_by_their_evidence(bank: str) -> None:
    """A case run for real is decided by what its commands were recorded doing wherever the detector has an
    evidence form; its exit statuses are the real ones (not all 0)."""
    from unscaffold.behaviors.detector import detect_how
    from unscaffold.suites import evidence_predicates

    detectors = load_bank(BANKS[bank]).detectors()
    cases = load_cases(BANKS[bank])
    recorded = [c for c in cases.cases if c.task is not None]
    kinds = {detect_how(detectors[c.component], cases.trajectory(c), evidence=cases.evidence(c))[1] for c in recorded
             if detectors[c.component].predicate in evidence_predicates()}
    assert kinds <= {"evidence"}
    statuses = {s.exit_code for c in recorded for s in cases.recorded(c).steps}  # type: ignore[union-attr]
    assert not recorded or statuses - {0}, "no recorded case has a failing command"


def test_commands_are_read_for_what_they_run() -> None:
    from unscaffold.behaviors.cases import Case, CaseFile
    from unscaffold.behaviors.program import split_heredocs, steps_of

    command = "cat > a.py <<'PY'\nprint(1)\nPY\npython3 a.py x && cat <<EOF | python3 -\nprint(2)\nEOF"
    text, bodies = split_heredocs(command)
    assert (text, bodies) == ("cat > a.py < __HEREDOC_0__\npython3 a.py x && cat < __HEREDOC_1__ | python3 -",
                              {"__HEREDOC_0__": "print(1)", "__HEREDOC_1__": "print(2)"})
    cases = CaseFile(cases=[Case(component="c", shows=True, why="w", steps=[
        "cat > a.py <<'PY'\nprint(1)\nPY", "python3 a.py x && cat <<EOF | python3 -\nprint(2)\nEOF",
        "timeout 5 python3 -c 'print(3)' < answer.txt > out.txt; echo 'CCO' | tee answer.txt"])])
    first, second, third = steps_of(cases.trajectory(cases.cases[0]))
    assert first.programs == []
    assert [(e.kind, e.path, e.content) for e in first.files] == [("write", "a.py", "print(1)")]
    assert [(p.code, p.argv) for p in second.programs] == [("print(1)", ["x"]), ("print(2)", [])]
    assert [(p.code, p.stdin) for p in third.programs] == [("print(3)", "answer.txt")] and third.bounded
    assert [(e.kind, e.path, e.content) for e in third.files] == [("write", "out.txt", None),
                                                                  ("write", "answer.txt", "CCO")]


def test_a_recipe_run_is_the_tool_call_and_keeps_its_place_in_the_order() -> None:
    """Under h the verifying recipe after the last save shows the behaviour, as the tool does under h*; before
    the last save neither does."""
    from unscaffold.behaviors.cases import Case, CaseFile
    from unscaffold.knowledge.kfolder import load_k

    bank = BANKS["spreadsheet"]
    recipe = load_k(bank.parent / "k").recipes["verify_output"].command(
        {"input": "spreadsheets/1_t_input.xlsx", "output": "output/1_t_output.xlsx", "answer_position": "D2:D6"})
    cases = load_cases(bank)
    save = cases.actions["fill_keep"]
    spec = load_bank(bank).detectors()["check:prefilled_guard"]
    for steps, shows in (([save, recipe], True), ([recipe, save], False)):
        case = Case(component="check:prefilled_guard", shows=shows, why="recipe", steps=steps)
        assert detect(spec, CaseFile(cases=[case]).trajectory(case)) is shows


def test_a_predicate_detector_is_checked_when_the_bank_loads() -> None:
    from pydantic import ValidationError

    from unscaffold.detector_spec import DetectorSpec

    with pytest.raises(ValidationError, match="unknown predicate 'answer_checked'; known: answer_canonical_any"):
        DetectorSpec(description="d", predicate="answer_checked")
    with pytest.raises(ValidationError, match="a predicate detector takes no tools, commands, ordered or after_last"):
        DetectorSpec(description="d", predicate="answer_written", commands=["answer"])


def test_an_ordered_pattern_detector_places_the_tool_call_in_the_order() -> None:
    from unscaffold.behaviors.cases import Case, CaseFile
    from unscaffold.behaviors.cases import ToolAction as Tool
    from unscaffold.detector_spec import DetectorSpec

    spec = DetectorSpec(description="looked first", tools=["show_file"], commands=[r"\bhead\b", r">"], ordered=True)
    for steps, shows in (([Tool(tool="show_file"), "echo x > out"], True), (["echo x > out", Tool(tool="show_file")],
                                                                             False), (["head in", "echo 1 > o"], True)):
        case = Case(component="c", shows=shows, why="order", steps=steps)
        assert detect(spec, CaseFile(cases=[case]).trajectory(case)) is shows
