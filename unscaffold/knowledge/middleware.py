"""Review middleware: a check's transcript-side rule, evaluated on what the student can see."""

from __future__ import annotations

import re
from collections import Counter

from pydantic import BaseModel

from unscaffold.knowledge.bank import TranscriptRule
from unscaffold.llm.types import AssistantResponse, Message, assistant_calls, command_of


class Hint(BaseModel):
    component_id: str
    evidence: str
    instruction: str


class Middleware(BaseModel):
    component_id: str
    rule: TranscriptRule


def student_commands(transcript: list[Message]) -> list[str]:
    """Commands the student itself ran (its own assistant messages), in order."""
    return [c for call in assistant_calls(transcript) if (c := command_of(call)) is not None]


def observations(transcript: list[Message]) -> list[str]:
    return [m.content for m in transcript if m.role == "tool"]


def proposed_command(proposal: AssistantResponse) -> str | None:
    for call in proposal.tool_calls:
        if call.arguments and isinstance(call.arguments.get("command"), str):
            return call.arguments["command"]
    return None


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def evaluate(mw: Middleware, transcript: list[Message], proposal: AssistantResponse, opening: int = 0) -> Hint | None:
    """Every condition the rule names must hold; the evidence says which facts made it fire. `opening`: the
    leading messages that are the suite's (a worked example's calls and outputs are not the student's own, so
    they neither satisfy a rule's prior command nor count as turns or results)."""
    rule = mw.rule
    transcript = transcript[opening:]
    finishing = not proposal.tool_calls
    command = proposed_command(proposal)
    evidence: list[str] = []
    if rule.when == "finish":
        if not finishing:
            return None
        evidence.append("the proposal ends the episode")
    elif rule.when == "command":
        if command is None:
            return None
    if rule.command_matches is not None:
        if command is None or not re.search(rule.command_matches, command):
            return None
        evidence.append(f"the proposed command matches /{rule.command_matches}/: {_short(command)}")
    if rule.command_lacks is not None:
        if command is None or re.search(rule.command_lacks, command):
            return None
        evidence.append(f"the proposed command lacks /{rule.command_lacks}/: {_short(command)}")
    if rule.require_prior_command is not None:
        if any(re.search(rule.require_prior_command, c) for c in student_commands(transcript)):
            return None
        evidence.append(f"no earlier command of the student matches /{rule.require_prior_command}/")
    results = observations(transcript)
    if rule.last_observation_matches is not None:
        if not results or not (m := re.search(rule.last_observation_matches, results[-1])):
            return None
        evidence.append(f"the latest result matches /{rule.last_observation_matches}/: {_short(m.group(0))}")
    if rule.repeated_error is not None:
        rep = rule.repeated_error
        signatures = Counter(
            m.group(0) for text in results[-rep.window :] if (m := re.search(rep.pattern, text))
        )
        common = signatures.most_common(1)
        if not common or common[0][1] < rep.count:
            return None
        evidence.append(f"the error {_short(common[0][0])!r} appeared {common[0][1]} times in the last "
                        f"{min(rep.window, len(results))} results")
    if rule.content_matches is not None:
        if not (m := re.search(rule.content_matches, proposal.content or "")):
            return None
        evidence.append(f"the proposal's text matches /{rule.content_matches}/: {_short(m.group(0))}")
    turn = sum(1 for m in transcript if m.role == "assistant") + 1
    if rule.min_turn is not None:
        if turn < rule.min_turn:
            return None
        evidence.append(f"this is turn {turn} (budget note from turn {rule.min_turn})")
    if rule.at_turns is not None:
        if turn not in rule.at_turns:
            return None
        evidence.append(f"this is turn {turn} (budget notes at turns {', '.join(map(str, rule.at_turns))})")
    return Hint(component_id=mw.component_id, evidence="; ".join(evidence), instruction=rule.instruction)


def triggered(middleware: list[Middleware], transcript: list[Message], proposal: AssistantResponse,
              opening: int = 0) -> list[Hint]:
    return [h for mw in middleware if (h := evaluate(mw, transcript, proposal, opening))]
