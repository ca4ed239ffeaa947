"""The prompt of a rescue rollout: what `unscaffold run --harness NAME` shows the student before its first reply.

`run` starts an episode with the harness's system prompt, then the suite's opening (AppWorld's official
first turn: a worked example, the rules, then the task) or, in the plain style, the task's instruction.
TRL renders a rollout's prompt from its dataset row before the environment is reset, so the openings are
built here once per task, each from the task's own running services where the suite needs them (the real
AppWorld lists the apps of the task's world through its bridge)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from unscaffold.benchmarks.base import Suite, Task
from unscaffold.llm.chat_render import template_row
from unscaffold.llm.types import Message
from unscaffold.minimal_harness.sandbox.base import SandboxKind

PLAIN = "plain"


def task_openings(suite: Suite, tasks: list[Task], style: str, sandbox: SandboxKind,
                  work_dir: Path) -> dict[str, list[Message]]:
    """Each task's messages after the system prompt, as `run` builds them for the opening `style`."""
    if style == PLAIN:
        return {t.id: [Message(role="user", content=t.instruction)] for t in tasks}
    work_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, list[Message]] = {}
    for task in tasks:
        trial_dir = Path(tempfile.mkdtemp(prefix="opening-", dir=work_dir))
        try:
            suite.prepare(task, trial_dir, sandbox)
            with suite.services(task, trial_dir):
                opening = suite.opening(task, trial_dir, style)
        finally:  # never scored: what prepare started for it (AppWorld's bridge) stops here
            suite.release(trial_dir)
            shutil.rmtree(trial_dir, ignore_errors=True)
        out[task.id] = opening or [Message(role="user", content=task.instruction)]
    return out


def prompt_rows(system_prompt: str, opening: list[Message]) -> list[dict[str, Any]]:
    """The conversation TRL renders, message for message as `run`'s hf: backend renders it (chat_render.py)."""
    return [template_row(Message(role="system", content=system_prompt)), *(template_row(m) for m in opening)]
