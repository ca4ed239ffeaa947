"""Outcomes are enumerated once; error outcomes and their drop reasons follow from that enumeration."""

from __future__ import annotations

import json
import re
from pathlib import Path

from unscaffold.benchmarks.base import Score
from unscaffold.outcomes import ERROR_OUTCOMES, Outcome
from unscaffold.run.models import TrialResult
from unscaffold.sft.drop_reasons import EXPLAINED, DropReason


def test_error_outcomes_are_every_outcome_but_passed_and_failed() -> None:
    assert ERROR_OUTCOMES == ("environment_error", "environment_unsupported", "verifier_error", "infra_error")


def test_each_error_outcome_is_a_drop_reason_spelled_the_same_and_explained() -> None:
    for outcome in ERROR_OUTCOMES:
        reason = DropReason(outcome.value)
        assert (reason.name, reason.value) == (outcome.name, outcome.value)
        assert EXPLAINED[reason]
    assert not {"passed", "failed"} & {r.value for r in DropReason}


def test_an_outcome_reads_and_writes_as_its_plain_name() -> None:
    result = TrialResult(trial_id="t", task_id="t", reward=0.0, exit_status="done", started_at="s", ended_at="e")
    assert result.outcome is Outcome.FAILED
    assert json.loads(result.model_dump_json())["outcome"] == "failed"
    assert Score(reward=0.0, outcome="verifier_error").outcome is Outcome.VERIFIER_ERROR  # type: ignore[arg-type]


def test_no_module_spells_an_error_outcome_as_a_string() -> None:
    """Comparisons go through `Outcome`, so renaming an outcome is one edit the type checker follows."""
    root = Path(__file__).resolve().parent.parent / "unscaffold"
    names = "|".join(o.value for o in ERROR_OUTCOMES)
    spelled = re.compile(rf"""["'](?:{names})["']""")
    found = [f"{path.relative_to(root)}:{n}" for path in sorted(root.rglob("*.py")) if path.name != "outcomes.py"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if spelled.search(line)]
    assert found == []
