"""How a command ends when it cannot give a clean result: one line on stderr and an exit status. Shared by
the main command and its sub-command groups, so none of them imports another command module."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

import typer

from unscaffold.errors import UnscaffoldError
from unscaffold.outcomes import Outcome

T = TypeVar("T")


def fail(e: Exception) -> NoReturn:
    """One line, exit 2 (bad input, a missing resource), or the error's own status (a run that stalled: 1)."""
    sys.stderr.write(f"error: {e}\n")
    raise typer.Exit(getattr(e, "exit_code", 2))


def or_fail(call: Callable[[], T]) -> T:
    """What `call` returns; an UnscaffoldError ends the command as `fail` says."""
    try:
        return call()
    except UnscaffoldError as e:
        fail(e)


def run_problem(results: dict) -> str | None:
    """Why a finished run is not a clean result (exit status 1): tasks were skipped, or no trial got past
    the machinery."""
    skipped = results.get("skipped_tasks") or {}
    if skipped:
        return f"{len(skipped)} task(s) skipped as unreadable: {', '.join(sorted(skipped))} (see skipped_tasks " \
               "in results.json)"
    outcomes = results.get("outcomes") or {}
    if results.get("n_trials") and outcomes.get(Outcome.INFRA_ERROR, 0) == results["n_trials"]:
        return results.get("infra_cause") or "every trial failed for infrastructure"
    return None


def exit_on_problem(results: dict) -> None:
    """Exit 1 with one line when a finished run is not a clean result (`run_problem`)."""
    problem = run_problem(results)
    if problem:
        sys.stderr.write(f"error: {problem}\n")
        raise typer.Exit(1)
