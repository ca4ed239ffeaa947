"""Checks that a trajectory is what the harness really did, before it becomes a training row."""

from __future__ import annotations

import json
from typing import Any

from unscaffold.collect.scrub import MARKUP

EXECUTE = "execute"


def audit(traj: dict[str, Any], reviews: list[dict[str, Any]], system_prompt: str) -> str | None:
    """The first audit failure as a drop reason, or None. Works on plain dicts (fast path)."""
    messages = traj["messages"]
    if len(messages) < 2 or messages[0]["role"] != "system" or messages[1]["role"] != "user":
        return "audit:history_rewritten"
    if messages[0].get("content") != system_prompt:
        return "audit:history_rewritten"
    open_calls: set[str] = set()
    assistant_turns = []
    for i, m in enumerate(messages[2:], 2):
        role = m["role"]
        if role == "assistant":
            assistant_turns.append(i)
            open_calls = {c["id"] for c in m.get("tool_calls") or []}
        elif role == "tool":
            if m.get("tool_call_id") not in open_calls:
                return "audit:orphan_observation"
        for key in ("content", "reasoning_content"):
            text = m.get(key)
            if role != "tool" and text and MARKUP.search(text):
                return "audit:markup_in_text"
    steps = traj.get("steps", [])
    for step in steps:
        i = step["message_index"]
        if i >= len(messages) or messages[i]["role"] != "assistant":
            return "audit:history_rewritten"
        calls = messages[i].get("tool_calls") or []
        if step.get("command") is not None:
            visible = calls[0]["function"]["arguments"] if calls else None
            if not isinstance(visible, dict) or visible.get("command") != step["command"]:
                return "audit:command_mismatch"
    if reviews and _accepted_differs(messages, steps, reviews):
        return "audit:history_rewritten"
    if traj.get("exit_status") != "submitted" or traj.get("final_answer") is None:
        return "audit:no_final_answer"
    last = messages[-1]
    if last["role"] != "assistant" or last.get("tool_calls"):
        return "audit:no_final_answer"
    return None


def _accepted_differs(messages: list[dict], steps: list[dict], reviews: list[dict]) -> bool:
    """Each visible assistant turn must be exactly what the review log says was accepted."""
    by_turn = {s["turn"]: s for s in steps}
    for review in reviews:
        step = by_turn.get(review.get("turn"))
        if step is None:
            continue
        shown = messages[step["message_index"]]
        accepted = review.get("replacement") if review.get("decision") == "REPLACE" else review.get("proposal")
        if accepted is None:
            continue
        if _visible(shown) != _accepted(accepted, review.get("decision") == "REPLACE"):
            return True
    return False


def _visible(message: dict) -> tuple:
    calls = tuple(
        (c["function"]["name"], json.dumps(c["function"]["arguments"], sort_keys=True))
        for c in message.get("tool_calls") or []
    )
    return (message.get("content") or "", message.get("reasoning_content") or "", calls)


def _accepted(response: dict, replacement: bool) -> tuple:
    if replacement:
        call = response.get("tool_call")
        calls = ((call["name"], json.dumps(call.get("arguments"), sort_keys=True)),) if call else ()
    else:
        calls = tuple((c["name"], json.dumps(c.get("arguments") if c.get("arguments") is not None
                                             else c.get("raw_arguments"), sort_keys=True))
                      for c in response.get("tool_calls") or [])
    return (response.get("content") or "", response.get("reasoning") or "", calls)
