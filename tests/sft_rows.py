"""Hand-built SFT rows shared by the SFT tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from unscaffold.minimal_harness.tool import EXECUTE_TOOL

TOOLS = [EXECUTE_TOOL]


def call(command: str, i: int) -> dict[str, Any]:
    return {"id": f"call_{i}", "type": "function", "function": {"name": "execute", "arguments": {"command": command}}}


def reviewed_row() -> dict[str, Any]:
    """A student turn, a replaced turn whose reasoning speaks as a reviewer (masked), a replaced final answer."""
    messages = [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "Do it."},
        {"role": "assistant", "content": "", "reasoning_content": "look", "tool_calls": [call("ls", 0)]},
        {"role": "tool", "tool_call_id": "call_0", "name": "execute", "content": "a.txt\n[exit_code=0]"},
        {"role": "assistant", "content": "", "reasoning_content": "The student proposal skipped a check.",
         "tool_calls": [call("cat a.txt", 1)]},
        {"role": "tool", "tool_call_id": "call_1", "name": "execute", "content": "hi\n[exit_code=0]"},
        {"role": "assistant", "content": "Done.", "reasoning_content": "I can answer."},
    ]
    return {"messages": messages, "tools": TOOLS, "task_id": "t", "trial_id": "t-0", "replacements": 2,
            "masked_reasoning_turns": [4]}


def two_queries_row() -> dict[str, Any]:
    """A second user message: Qwen3.5 then drops the reasoning of every turn before it."""
    messages = [
        {"role": "user", "content": "First."},
        {"role": "assistant", "content": "", "reasoning_content": "R0", "tool_calls": [call("ls", 0)]},
        {"role": "tool", "tool_call_id": "call_0", "name": "execute", "content": "x\n[exit_code=0]"},
        {"role": "assistant", "content": "One.", "reasoning_content": "R1"},
        {"role": "user", "content": "Second."},
        {"role": "assistant", "content": "Two.", "reasoning_content": "R2"},
    ]
    return {"messages": messages, "tools": TOOLS, "masked_reasoning_turns": []}


def overfit_rows(n: int = 16) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        messages = [
            {"role": "system", "content": "Use the execute tool."},
            {"role": "user", "content": f"Write {i} to answer.txt"},
            {"role": "assistant", "content": "", "reasoning_content": f"I write {i}.",
             "tool_calls": [call(f"echo {i} > answer.txt", 0)]},
            {"role": "tool", "tool_call_id": "call_0", "name": "execute", "content": "\n[exit_code=0]"},
            {"role": "assistant", "content": f"Wrote {i}.", "reasoning_content": "Done."},
        ]
        rows.append({"messages": messages, "tools": TOOLS, "masked_reasoning_turns": []})
    return rows


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def trl_format(row: dict[str, Any]) -> dict[str, Any]:
    """The row as TRL's conversational format and public tool-calling sets write it: no call ids, no
    `tool_call_id`, arguments as a JSON string, `null` content beside calls, reasoning under `reasoning`."""
    messages = []
    for m in row["messages"]:
        m = {k: v for k, v in m.items() if k != "tool_call_id"}
        if m.get("tool_calls"):
            m["tool_calls"] = [{"type": "function", "function": {"name": c["function"]["name"],
                                                                 "arguments": json.dumps(c["function"]["arguments"])}}
                               for c in m["tool_calls"]]
            m["content"] = None
        if "reasoning_content" in m:
            m["reasoning"] = m.pop("reasoning_content")
        messages.append(m)
    return {"messages": messages, "tools": row["tools"], "masked_reasoning_turns": row["masked_reasoning_turns"]}


def prompt_completion_format(row: dict[str, Any]) -> dict[str, Any]:
    """`trl_format` split as TRL's prompt/completion conversational rows: system and task as the prompt, the
    rest as the completion, `tools` as a JSON string (as an Arrow-backed dataset stores them)."""
    trl = trl_format(row)
    messages = trl["messages"]
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    return {"prompt": messages[:first], "completion": messages[first:], "tools": json.dumps(trl["tools"]),
            "masked_reasoning_turns": trl["masked_reasoning_turns"]}
