"""Helpers shared by the reviewer tests: a tiny K folder, replay files, transcripts, submissions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from unscaffold.knowledge.kfolder import K, load_k
from unscaffold.llm.types import AssistantResponse, Message, ToolCall

TASK = "Fill the totals.\noutput_path: output/answer.xlsx\n"
FINISH_INSTRUCTION = "Before finishing, run the answer check on the output workbook."


def write_k(root: Path, pad_chars: int = 0) -> K:
    """A K with one recipe, one finish check whose remedy runs the recipe, and a memory note."""
    files: dict[str, Any] = {
        "index.json": {
            "bank": "tiny",
            "unscaffold_version": "0.1.0",
            "components": [
                {"id": "tool:answer-check", "kind": "tool", "path": "tools/answer-check.md",
                 "summary": "checks the answer workbook", "data": "tools/answer-check.json"},
                {"id": "check:finish-guard", "kind": "check", "path": "checks/finish-guard.md",
                 "summary": "a finish needs a checked answer", "data": "checks/finish-guard.json"},
                {"id": "memory:notes", "kind": "memory", "path": "memory/notes.md", "summary": "recurring errors"},
            ],
        },
        "reviewer_prompt.md": "You review a spreadsheet student.",
        "tools/answer-check.md": "Run `python3 check.py ARGS` to check the answer workbook.",
        "tools/answer-check.json": {"tool": "answer-check", "description": "check", "parameters": {"type": "object"},
                                    "command_template": "python3 check.py {args}"},
        "checks/finish-guard.md": "A finish needs evidence that the answer was checked.",
        "checks/finish-guard.json": {
            "component_id": "check:finish-guard",
            "rule": {
                "when": "finish",
                "require_prior_command": r"check\.py",
                "instruction": FINISH_INSTRUCTION,
                "remedy": {"tool": "answer-check", "arguments": {"path": "{out}", "mode": "strict"},
                           "extract": {"out": r"output_path: (\S+)"},
                           "reasoning": "Before I finish I will check the answer workbook."},
            },
        },
        "memory/notes.md": "NOTE-LITERALS: write literal values, not formulas as strings.",
    }
    if pad_chars:
        files["memory/padding.md"] = "x" * pad_chars
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return load_k(root)


def write_replay(path: Path, entries: list[Any], task_id: str = "t1") -> str:
    path.write_text(json.dumps({task_id: entries}))
    return f"replay:{path}"


def transcript(task: str = TASK, *commands: str) -> list[Message]:
    """System + task, then one assistant command and its result per command."""
    rows = [Message(role="system", content="sys"), Message(role="user", content=task)]
    for i, command in enumerate(commands):
        rows.append(AssistantResponse(tool_calls=[ToolCall(id=f"c{i}", name="execute",
                                                           arguments={"command": command})]).to_message())
        rows.append(Message(role="tool", tool_call_id=f"c{i}", name="execute", content="ok\n[exit_code=0]"))
    return rows


def proposal(command: str | None = None, content: str | None = None) -> AssistantResponse:
    calls = [ToolCall(id="p", name="execute", arguments={"command": command})] if command is not None else []
    return AssistantResponse(content=content, tool_calls=calls)


def exec_call(command: str) -> dict[str, Any]:
    return {"name": "execute", "arguments": {"command": command}}


def replace_with(command: str, reason: str = "needs a fix", **extra: Any) -> dict[str, Any]:
    return {"decision": "REPLACE", "replacement": {"reasoning": "I will do it properly.",
                                                   "tool_call": exec_call(command)}, "reason": reason, **extra}


def passes(reason: str = "sound step") -> dict[str, Any]:
    return {"decision": "PASS", "reason": reason}


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]
