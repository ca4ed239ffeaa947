"""Running a plan: a finished stage whose digest is unchanged is skipped, a changed one is rerun from a clean
output, an unfinished one resumes where its command can (a run keeps its finished trials) and restarts
where it cannot. One plan folder is run by one process at a time."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel
from rich.console import Console

from unscaffold.console import out_console
from unscaffold.errors import UnscaffoldError
from unscaffold.reproduce.plan import Plan, Stage
from unscaffold.reproduce.state import Finished, State, stage_digest


class StageRun(BaseModel):
    name: str
    about: str
    shown: str
    seconds: float = 0.0
    status: str = "pending"  # ran, skipped, failed


class StageFailed(UnscaffoldError):
    """A stage's command failed: the plan stops with its status (1: a run made no progress, else 2). Its
    finished stages stay finished; rerunning continues from this one."""

    def __init__(self, message: str, status: int, runs: list[StageRun] | None = None) -> None:
        super().__init__(message)
        self.exit_code = 1 if status == 1 else 2
        self.runs = runs or []  # every stage's status when the plan stopped


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def run_stage(stage: Stage, folder: Path) -> int:
    """The stage's `unscaffold` command in a child process; its own output goes to the terminal."""
    command = [sys.executable, "-m", "unscaffold.cli", *stage.command(folder)]
    out = folder / stage.out
    out.parent.mkdir(parents=True, exist_ok=True)
    if not stage.stdout:
        return subprocess.run(command).returncode
    partial = out.with_name(out.name + ".partial")
    with open(partial, "w", encoding="utf-8") as sink:
        code = subprocess.run(command, stdout=sink).returncode
    if code == 0:
        os.replace(partial, out)
    return code


def start_index(plan: Plan, start: str | None) -> int:
    """The index `--from` names (past the end when none is given)."""
    if start is None:
        return len(plan.stages)
    names = [s.name for s in plan.stages]
    if start not in names:
        raise UnscaffoldError(f"--from: no stage {start!r} in the plan (stages: {', '.join(names)})")
    return names.index(start)


def execute(plan: Plan, folder: Path, *, start: str | None = None, console: Console | None = None,
            run: Callable[[Stage, Path], int] = run_stage) -> list[StageRun]:
    """Run every stage that is not finished with the same digest; stop at the first failure. `run` runs one
    stage's command and returns its exit status."""
    from filelock import FileLock, Timeout

    console = console or out_console()
    first_forced = start_index(plan, start)
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(folder / ".lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise UnscaffoldError(f"{folder}: another process is running this plan") from None
    runs = [StageRun(name=s.name, about=s.about, shown=s.shown(folder)) for s in plan.stages]
    try:
        state = State.load(folder)
        for i, (stage, record) in enumerate(zip(plan.stages, runs, strict=True)):
            digest = stage_digest(stage, state, folder)
            done = state.stages.get(stage.name)
            out = folder / stage.out
            console.rule(f"[bold]{i + 1}. {stage.name}: {stage.about}")
            console.print(stage.shown(folder), style="cyan", highlight=False, soft_wrap=True)
            if i < first_forced and done is not None and done.digest == digest and out.exists():
                record.status = "skipped"
                console.print(f"finished earlier ({done.seconds:.0f} s), inputs and command unchanged: skipped",
                              style="dim", highlight=False)
                continue
            if done is not None or i >= first_forced or not stage.resumes:
                _remove(out)  # a changed or forced stage, or one whose command cannot resume, starts clean
            state.stages.pop(stage.name, None)
            state.save(folder)
            t0 = time.monotonic()
            code = run(stage, folder)
            record.seconds = round(time.monotonic() - t0, 1)
            if code != 0:
                record.status = "failed"
                raise StageFailed(f"stage {stage.name}: `{stage.shown(folder)}` failed with exit code {code}", code,
                                  runs)
            record.status = "ran"
            state.stages[stage.name] = Finished.now(digest, record.seconds)
            state.save(folder)
    finally:
        lock.release()
    return runs
