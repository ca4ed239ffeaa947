"""`rules`: a deterministic reviewer. A fired check with a remedy becomes a replacement running the
remedy tool's recipe; everything else passes. No model is called (calls=0): a baseline and a smoke test."""

from __future__ import annotations

import re
from typing import Any

from unscaffold.knowledge.bank import Remedy
from unscaffold.knowledge.kfolder import K
from unscaffold.knowledge.middleware import Hint, proposed_command
from unscaffold.minimal_harness.tool import TOOL_NAME
from unscaffold.reviewer.base import FixedSession, RawSubmission, ReviewRequest, ReviewSession, decision
from unscaffold.reviewer.submission import REASON_MAX

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def remedy_arguments(remedy: Remedy, task: str) -> dict[str, str] | None:
    """The remedy's arguments with {name} filled from its `extract` regexes over the task; None if any fails."""
    values: dict[str, str] = {}
    for name, pattern in remedy.extract.items():
        m = re.search(pattern, task)
        if m is None:
            return None
        values[name] = m.group(1) if m.re.groups else m.group(0)
    missing: list[str] = []

    def fill(m: re.Match[str]) -> str:
        if m.group(1) not in values:
            missing.append(m.group(1))
            return m.group(0)
        return values[m.group(1)]

    out = {key: PLACEHOLDER.sub(fill, value) for key, value in remedy.arguments.items()}
    return None if missing else out


def rules_decision(request: ReviewRequest) -> dict[str, Any]:
    """The first fired hint whose check has a usable remedy decides; otherwise PASS."""
    k: K | None = request.k
    if k is None:
        return decision("PASS", "no reference K: nothing to apply")
    known = set(k.component_ids())
    checks = {mw.component_id: mw for mw in k.middleware}
    for hint in request.hints:
        mw = checks.get(hint.component_id)
        remedy = mw.rule.remedy if mw else None
        if remedy is None or remedy.tool not in k.recipes:
            continue
        arguments = remedy_arguments(remedy, request.task())
        if arguments is None:
            continue
        command = k.recipes[remedy.tool].command(arguments)
        if proposed_command(request.proposal) == command:
            return decision("PASS", f"the proposal already runs the remedy of {hint.component_id}")
        used = [c for c in (hint.component_id, f"tool:{remedy.tool}") if c in known]
        return decision(
            "REPLACE",
            hint.instruction[:REASON_MAX],
            components_used=used,
            replacement={"reasoning": remedy.reasoning, "tool_call": {"name": TOOL_NAME,
                                                                      "arguments": {"command": command}}},
        )
    if request.hints:
        return decision("PASS", _hint_reason(request.hints))
    return decision("PASS", "no check fired")


def _hint_reason(hints: list[Hint]) -> str:
    return f"checks fired without an applicable remedy: {', '.join(h.component_id for h in hints)}"[:REASON_MAX]


class RulesReviewer:
    name = "rules"

    def open(self, request: ReviewRequest) -> ReviewSession:
        return FixedSession(RawSubmission(payload=rules_decision(request), calls=0))
