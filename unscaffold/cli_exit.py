"""How a command ends when it cannot give a clean result, in one place for every command and sub-command:

- bad input (an `UnscaffoldError`, or a usage error of the command line itself: a value that does not
  parse, an unknown option, a missing argument) is one line on stderr, exit 2 (or the error's own status);
- anything else is a bug: one line saying so and where its traceback was written, exit 1; with `--debug`
  (or `UNSCAFFOLD_DEBUG=1`) the traceback is printed too.

Commands raise; `CommandGroup.main` (the root command's entry, which typer's test runner calls too) decides
what the person sees."""

from __future__ import annotations

import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from unscaffold.console import debugging, end_invocation, start_invocation
from unscaffold.errors import UnscaffoldError, did_you_mean
from unscaffold.outcomes import Outcome

BUG_MESSAGE_CHARS = 300  # of an internal error's message on its one line; the traceback file has all of it


def one_line(text: str) -> str:
    """A message as one line: an error never spans lines (a log reader greps for `error:`)."""
    return " ".join(str(text).split())


def _usage_message(e: typer.TyperException) -> str:
    """A command-line error in the words of the project's other errors: the flag, then the problem, then where
    the command's help is. Typer's exceptions are reached through public names only (`TyperException`,
    `BadParameter` and their attributes)."""
    message = e.format_message()
    param, ctx = getattr(e, "param", None), getattr(e, "ctx", None)
    if isinstance(e, typer.BadParameter) and not hasattr(e, "param_type") and param is not None \
            and e.param_hint is None:  # a value that does not parse (a missing one has `param_type`)
        message = f"{'/'.join(getattr(param, 'opts', None) or [str(param.name)])}: {e.message}"
    unknown = getattr(e, "option_name", None)
    if unknown and ctx is not None:  # no such option: the closest the command has
        flags = [o for p in ctx.command.params for o in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]
                 if o.startswith("-")]
        message = f"{unknown}: no such option{did_you_mean(unknown, flags)}"
    message = one_line(message).rstrip(".")
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        message += f" (see '{ctx.command_path} {ctx.help_option_names[0]}')"
    return message


def _traceback_file(e: BaseException) -> Path | None:
    """Where the traceback of an internal error is kept for a bug report (a new file in the temp folder)."""
    try:
        with tempfile.NamedTemporaryFile("w", prefix="unscaffold-traceback-", suffix=".txt", delete=False,
                                         encoding="utf-8") as f:
            f.write(f"unscaffold {' '.join(sys.argv[1:])}\n\n")
            f.write("".join(traceback.format_exception(e)))
        return Path(f.name)
    except OSError:
        return None


def error_status(e: BaseException) -> int:
    """The exit status of an error: a usage or input error 2 (or its own `exit_code`), a bug 1; says it on
    stderr in one line (and, for a bug, where its traceback is)."""
    if type(e).__name__ == "NoArgsIsHelpError":  # typer printed the help already
        return int(getattr(e, "exit_code", 2))
    if isinstance(e, typer.TyperException):  # a usage error (exit 2), or a file click could not open
        usage = hasattr(e, "ctx")
        sys.stderr.write(f"error: {_usage_message(e) if usage else one_line(e.format_message())}\n")
        return e.exit_code
    if isinstance(e, typer.Abort):
        sys.stderr.write("error: aborted\n")
        return 1
    if isinstance(e, UnscaffoldError):
        if debugging():
            sys.stderr.write("".join(traceback.format_exception(e)))
        sys.stderr.write(f"error: {e}\n")  # several problems found at once (preflight) are a line each
        return int(getattr(e, "exit_code", 2))
    what = one_line(f"{type(e).__name__}: {e}")
    if len(what) > BUG_MESSAGE_CHARS:
        what = what[:BUG_MESSAGE_CHARS] + "..."
    if debugging():
        sys.stderr.write("".join(traceback.format_exception(e)))
        sys.stderr.write(f"error: internal error (a bug in unscaffold): {what}\n")
        return 1
    kept = _traceback_file(e)
    where = f"its traceback is in {kept}; " if kept else ""
    sys.stderr.write(f"error: internal error (a bug in unscaffold): {what} ({where}re-run with --debug to see "
                     "it)\n")
    return 1


class CommandGroup(TyperGroup):
    """The root command: runs the command line without click's own error printing and ends every failure
    through `error_status`, so each command only raises."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, windows_expand_args: bool = True,
             **extra: Any) -> Any:
        if not standalone_mode:  # a caller that handles errors itself
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        start_invocation()
        try:
            rv = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
            status = rv if isinstance(rv, int) else 0  # an int is the status a command exited with
        except Exception as e:
            try:
                status = error_status(e)
            except Exception as failed:  # never a second traceback box for the person reading
                sys.stderr.write(f"error: internal error (a bug in unscaffold): {one_line(repr(e))}; while saying "
                                 f"so: {one_line(repr(failed))}\n")
                status = 1
        finally:
            end_invocation()
        sys.exit(status)


def fail(message: str, status: int = 2) -> NoReturn:
    """End the command with one line and `status` (for a problem that is not an exception of its own)."""
    sys.stderr.write(f"error: {message}\n")
    raise typer.Exit(status)


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
        fail(problem, 1)
