"""Failed train trials, rendered as the text the analyst reads and its quotes are checked against."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.run.folder import RunFolder, TrialFolder
from unscaffold.run.models import TrialResult

PASS = 1.0 - 1e-9
MAX_CHARS = 8_000  # per trajectory: head and tail kept
TOTAL_CHARS = 160_000  # all failures together: many failures get shorter excerpts
MIN_CHARS = 2_000
MAX_TEXT = 1_200  # per message


class Failure(BaseModel):
    task_id: str
    reward: float
    reason: str
    text: str


def passed(reward: float) -> bool:
    return reward >= PASS


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters elided ...]\n{text[-half:]}"


def render(traj: Trajectory, result: TrialResult, limit: int = MAX_CHARS) -> str:
    """The student's own turns, the tool results it saw, how it ended and how it was scored."""
    lines = []
    for m in traj.messages:
        if m.role == "system":
            continue
        if m.role == "user":
            lines.append(f"[task] {_clip(m.content, MAX_TEXT)}")
        elif m.role == "assistant":
            if m.reasoning_content:
                lines.append(f"[student reasoning] {_clip(m.reasoning_content, MAX_TEXT)}")
            if m.content:
                lines.append(f"[student] {_clip(m.content, MAX_TEXT)}")
            for call in m.tool_calls or []:
                args = call.function.arguments
                shown = args.get("command") if isinstance(args, dict) and "command" in args else json.dumps(args)
                lines.append(f"[call {call.function.name}] {_clip(str(shown), MAX_TEXT)}")
        else:
            lines.append(f"[result] {_clip(m.content, MAX_TEXT)}")
    lines.append(f"[ended] {traj.exit_status}: {traj.exit_message or ''}".rstrip(": "))
    lines.append(f"[score] reward {result.reward:g}: {result.reason}")
    return _clip("\n".join(lines), limit)


def collect_failures(run_dirs: list[Path], rewards: dict[str, float]) -> dict[str, Failure]:
    """Failing task id -> its failure, read from whichever run folder holds the task's trial."""
    found: dict[str, TrialFolder] = {}
    for run_dir in run_dirs:
        for trial in RunFolder(run_dir).finished_trials():
            result = trial.read_result()
            if result.task_id in rewards and not passed(rewards[result.task_id]):
                found.setdefault(result.task_id, trial)
    limit = max(MIN_CHARS, min(MAX_CHARS, TOTAL_CHARS // max(1, len(found))))
    out = {}
    for task_id, trial in sorted(found.items()):
        result = trial.read_result()
        traj = trial.read_trajectory()
        text = render(traj, result, limit) if traj is not None else \
            f"[no trajectory]\n[score] reward {result.reward:g}: {result.reason}"
        out[task_id] = Failure(task_id=task_id, reward=result.reward, reason=result.reason, text=text)
    return out
