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
from unscaffold.behaviors.program import check_time
from unscaffold.minimal_harness.evidence import CallEvent, CommandEvidence, Event, ExecEvent, OpenEvent, WriteCloseEvent

EPos = tuple[int, int]  # message index of the turn, seq of the event in its command (-1: an h* tool call)


@dataclass
class Recorded:
    at: EPos
    event: Event
    command: CommandEvidence
    counts: bool  # the command had not failed before it


@dataclass
class Index:
    """One trial's events, worked out once per view (every evidence form of a bank reads them): counted calls
    by name, writes by path, counted program starts."""

    calls: dict[str, list[tuple[EPos, CallEvent]]]
    writes: dict[str, list[tuple[EPos, str | None]]]
    execs: list[tuple[EPos, list[str]]]


def events(view: View) -> Iterator[Recorded]:
    """Every recorded event of the trial in order, each saying whether it counts."""
    for command in sorted(view.evidence or [], key=lambda c: c.message_index):
        check_time()
        failed = False
        for event in sorted(command.events, key=lambda e: e.seq):
            yield Recorded((command.message_index, event.seq), event, command, not failed)
            if event.kind == "exit" and (event.code not in (0, None) or event.exception):
                failed = True


def index(view: View) -> Index:
    cached = view.__dict__.get("_evidence_index")
    if isinstance(cached, Index):
        return cached
    out = Index(calls={}, writes={}, execs=[])
    for r in events(view):
        e = r.event
        if isinstance(e, CallEvent) and r.counts:
            out.calls.setdefault(e.name, []).append((r.at, e))
        elif isinstance(e, WriteCloseEvent):
            out.writes.setdefault(e.path, []).append((r.at, e.content))
        elif isinstance(e, OpenEvent) and e.mode != "r" and e.inside_workspace:
            out.writes.setdefault(e.path, []).append((r.at, None))
        elif isinstance(e, ExecEvent) and r.counts and e.argv:
            out.execs.append((r.at, e.argv))
    _shell_writes_from_text(view, out)
    view.__dict__["_evidence_index"] = out
    return out


def _shell_writes_from_text(view: View, out: Index) -> None:
    """A command recorded without the preload library (`python-audit` alone, as under docker) has its Python
    recorded but not what the shell and other programs wrote: those writes are taken from the command's text,
    placed at the start of the command (`echo X > answer.txt && python3 check.py` keeps its order)."""
    shell_blind = {c.message_index for c in view.evidence or [] if "ldpreload" not in c.recorder}
    for step in view.steps:
        if step.message_index in shell_blind:
            for e in step.files:
                if e.kind == "write" and not e.path.startswith("/"):
                    out.writes.setdefault(e.path.removeprefix("./"), []).append(((step.message_index, -1), e.content))


def calls(view: View, name: str, *, ok: bool = True) -> list[tuple[EPos, CallEvent]]:
    """Counted calls whose recorded name matches the regular expression `name`; `ok`: returned, not raised."""
    found = [c for called, cs in index(view).calls.items() if re.search(name, called) for c in cs
             if c[1].ok or not ok]
    return sorted(found, key=lambda c: c[0])


def writes(view: View, path: str) -> list[tuple[EPos, str | None]]:
    """(where, content afterwards when recorded) for each write of a workspace file matching `path`."""
    return sorted((w for written, ws in index(view).writes.items() if re.search(path, written) for w in ws),
                  key=lambda w: w[0])


def execs(view: View, programs: set[str]) -> list[tuple[EPos, list[str]]]:
    """Counted starts of these programs (by basename), with their arguments."""
    return [(at, argv) for at, argv in index(view).execs if argv[0].rsplit("/", 1)[-1] in programs]


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
