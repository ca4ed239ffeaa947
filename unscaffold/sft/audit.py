"""Checks that a trajectory is what the harness really did, before it becomes a training row."""

from __future__ import annotations

import json
import re
from typing import Any

from unscaffold.sft.drop_reasons import DropReason

# Every control token of the chat templates the project renders (TRL's qwen2_5 for ChatML models such as
# SmolLM2, qwen3, qwen3_5_think/nothink and their successors, and Llama 3's headers for `hf:` checkpoints
# that bring theirs). In a trained row any of them would end a turn, open a call or a result, or close a
# parameter where the template did not: the rendered row would teach the model a broken turn structure.
CHAT_MARKUP = re.compile(
    r"<\|[A-Za-z0-9_]+\|>"  # <|im_start|> <|im_end|> <|endoftext|>, Qwen's vision pads, <|eot_id|> <|start_header_id|>
    r"|</?(?:tool_call|tool_response|tools|think)>"  # Hermes-style calls and results, the tool list, Qwen3 reasoning
    r"|<function=|</function>|<parameter=|</parameter>"  # Qwen3.5 / Qwen3-Coder XML calls
)
CHAT_MARKUP_BYTES = re.compile(CHAT_MARKUP.pattern.encode())


def audit(traj: dict[str, Any], reviews: list[dict[str, Any]], system_prompt: str | None, raw: bytes | None = None,
          *, require_final_answer: bool = True) -> DropReason | None:
    """The first audit failure as a drop reason, or None. Works on plain dicts (fast path); with the
    file's `raw` bytes, the per-message markup scan only runs when the markup occurs somewhere at all.
    `require_final_answer=False` accepts a trial that ended without one (turn limit). `system_prompt` None
    (a run under h*, kept for the data-source ablation) accepts the bank's prompt."""
    messages = traj["messages"]
    if len(messages) < 2 or messages[0]["role"] != "system" or messages[1]["role"] != "user":
        return DropReason.NO_TASK_OPENING
    if system_prompt is not None and messages[0].get("content") != system_prompt:  # None: h*'s own (ablation)
        return DropReason.SYSTEM_PROMPT_CHANGED
    body = messages[2:]
    if _answers(body) != [m.get("tool_call_id") for m in body if m["role"] == "tool"] and _orphan(body):
        return DropReason.ORPHAN_OBSERVATION
    if raw is None or CHAT_MARKUP_BYTES.search(raw):
        markup = chat_markup(body)
        if markup is not None:
            return markup
    steps = traj.get("steps", [])
    n = len(messages)
    opening = traj.get("opening_messages", 0)
    if type(opening) is not int or not 0 <= opening <= n:
        return DropReason.NO_TASK_OPENING
    for step in steps:
        i = step["message_index"]
        if i >= n or messages[i]["role"] != "assistant":
            return DropReason.STEP_NOT_ASSISTANT
        if i < opening:  # the suite's worked example is context; a student turn comes after it
            return DropReason.STEP_IN_OPENING
    for step in steps:
        command = step.get("command")
        if command is None:
            continue
        calls = messages[step["message_index"]].get("tool_calls")
        if not calls or not isinstance(args := calls[0]["function"]["arguments"], dict) \
                or args.get("command") != command:
            return DropReason.COMMAND_MISMATCH
    if reviews and _accepted_differs(messages, steps, reviews):
        return DropReason.REVIEW_LOG_MISMATCH
    if not require_final_answer:
        return None
    if traj.get("exit_status") != "submitted" or traj.get("final_answer") is None:
        return DropReason.NO_FINAL_ANSWER
    last = messages[-1]
    if last["role"] != "assistant" or last.get("tool_calls"):
        return DropReason.NO_FINAL_ANSWER
    return None


def chat_markup(body: list[dict[str, Any]]) -> DropReason | None:
    """Chat-template markup in what the row trains or replays as the model's own: the text and reasoning of
    every turn but tool results (a command may print anything), and every tool call's name and arguments
    (a command holding `<|im_end|>\\n<|im_start|>user` would end the turn in the middle of the call)."""
    for m in body:
        if m["role"] == "tool":
            continue
        if CHAT_MARKUP.search(m.get("content") or "") or CHAT_MARKUP.search(m.get("reasoning_content") or ""):
            return DropReason.MARKUP_IN_TEXT
        for call in m.get("tool_calls") or ():
            function = call.get("function") or {}
            args = function.get("arguments")
            text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)  # no `<`, `|` escapes
            if CHAT_MARKUP.search(str(function.get("name") or "")) or CHAT_MARKUP.search(text):
                return DropReason.MARKUP_IN_CALL
    return None


def _answers(body: list[dict]) -> list[str]:
    """The call ids in the order the harness answers them: every call of every assistant turn."""
    return [c["id"] for m in body if m["role"] == "assistant" for c in m.get("tool_calls") or ()]


def _orphan(body: list[dict]) -> bool:
    """The slow, exact check: a tool message must answer a call of the assistant turn before it."""
    open_calls: set[str] = set()
    for m in body:
        if m["role"] == "assistant":
            open_calls = {c["id"] for c in m.get("tool_calls") or ()}
        elif m["role"] == "tool" and m.get("tool_call_id") not in open_calls:
            return True
    return False


def _accepted_differs(messages: list[dict], steps: list[dict], reviews: list[dict]) -> bool:
    """Each visible assistant turn must be exactly what the review log says was accepted (a hot path of
    build-sft: no lists are built to compare calls)."""
    index_of = {s["turn"]: s["message_index"] for s in steps}
    for review in reviews:
        i = index_of.get(review.get("turn"))
        if i is None:
            continue
        replaced = review.get("decision") == "REPLACE"
        accepted = review.get("replacement" if replaced else "proposal")
        if accepted is None:
            continue
        shown = messages[i]
        if ((shown.get("content") or "") != (accepted.get("content") or "")
                or (shown.get("reasoning_content") or "") != (accepted.get("reasoning") or "")):
            return True
        shown_calls = shown.get("tool_calls") or []
        if replaced:
            call = accepted.get("tool_call")
            if len(shown_calls) != (1 if call else 0):
                return True
            if call:
                function = shown_calls[0]["function"]
                if function["name"] != call["name"] or function["arguments"] != call.get("arguments"):
                    return True
            continue
        calls = accepted.get("tool_calls") or ()
        if len(shown_calls) != len(calls):
            return True
        for made, proposed in zip(shown_calls, calls, strict=True):
            args = proposed.get("arguments")
            if args is None:
                args = proposed.get("raw_arguments")
            function = made["function"]
            if function["name"] != proposed["name"] or function["arguments"] != args:
                return True
    return False
