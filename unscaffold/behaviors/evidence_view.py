"""What the suites' evidence forms of a behaviour share: the recorded events of a trial in order, which of
them count, and where an h* tool call falls among them.

An event's place is (message index of the command's turn, its `seq` in the command). A tool call of the h*
bank (recorded as a turn, not a command) takes the place (message index, -1). An event counts only when
the command had not already failed before it: a process of that command that exited with a non-zero status
or an uncaught exception ends what the command can show from that point on (`python3 crash.py; python3
check.py` shows no check). Writes count always: a file written by a command that later failed is still
written."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from unscaffold.behaviors.predicates import View
from unscaffold.minimal_harness.evidence import CallEvent, CommandEvidence, Event, ExecEvent, OpenEvent, WriteCloseEvent

EPos = tuple[int, int]  # message index of the turn, seq of the event in its command (-1: an h* tool call)
NONE = (-1, -1)


@dataclass
class Recorded:
    at: EPos
    event: Event
    command: CommandEvidence
    counts: bool  # the command had not failed before it


def events(view: View) -> Iterator[Recorded]:
    """Every recorded event of the trial in order, each saying whether it counts."""
    for command in sorted(view.evidence or [], key=lambda c: c.message_index):
        failed = False
        for event in sorted(command.events, key=lambda e: e.seq):
            yield Recorded((command.message_index, event.seq), event, command, not failed)
            if event.kind == "exit" and (event.code not in (0, None) or event.exception):
                failed = True


def calls(view: View, name: str, *, ok: bool = True) -> list[tuple[EPos, CallEvent]]:
    """Counted calls whose recorded name matches the regular expression `name`; `ok`: returned, not raised."""
    return [(r.at, r.event) for r in events(view) if isinstance(r.event, CallEvent) and r.counts and
            re.search(name, r.event.name) and (r.event.ok or not ok)]


def writes(view: View, path: str) -> list[tuple[EPos, str | None]]:
    """(where, content afterwards when recorded) for each write of a workspace file matching `path`."""
    out: list[tuple[EPos, str | None]] = []
    for r in events(view):
        e = r.event
        if isinstance(e, WriteCloseEvent) and re.search(path, e.path):
            out.append((r.at, e.content))
        elif isinstance(e, OpenEvent) and e.mode != "r" and e.inside_workspace and re.search(path, e.path):
            out.append((r.at, None))
    return out


def execs(view: View, programs: set[str]) -> list[tuple[EPos, list[str]]]:
    """Counted starts of these programs (by basename), with their arguments."""
    return [(r.at, r.event.argv) for r in events(view) if isinstance(r.event, ExecEvent) and r.counts and
            r.event.argv and r.event.argv[0].rsplit("/", 1)[-1] in programs]


def tool_calls(view: View, names: set[str], arguments: str | None = None) -> list[tuple[EPos, dict]]:
    """Calls of these h* tools (not commands, so not recorded), at their turn's place."""
    import json

    return [((s.message_index, -1), s.arguments) for s in view.steps if s.tool in names and s.command == "" and
            (arguments is None or re.search(arguments, json.dumps(s.arguments, sort_keys=True)))]


def value_of(call: CallEvent, index: int, *keywords: str) -> object:
    """A call's argument by position, else by one of its keyword names."""
    if len(call.args) > index:
        return call.args[index]
    return next((call.keywords[k] for k in keywords if k in call.keywords), None)
