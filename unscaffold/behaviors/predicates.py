"""Deterministic behaviour predicates a bank's detector names (`predicate = "..."`), for behaviours a
regular expression over command text cannot recognise reliably: which library call, on which file,
before or after which write, with which effect in the observations.

Each predicate reads the student's steps (`program.Step`) in order. A call of an h* tool is a step
like a command, and takes the same place in the order: under h* the tool call shows the behaviour
only where the same command would under h (before the first write, after the last one, ...), so
eligibility and recovery are measured alike under both harnesses.

This module holds what every predicate reads (`View`) and the helpers they share; each suite's predicates
live in its folder (`detectors.py`, named by its suite.toml) and the suite registry (`unscaffold/suites.py`)
collects them all; this package imports no suite.
They live in the package, not in the bank, so an edited bank can name them but never run code of its own
on the host."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from unscaffold.behaviors.program import Program, Step, parse_python
from unscaffold.behaviors.pyflow import Flow
from unscaffold.minimal_harness.evidence import CommandEvidence

Pos = tuple[int, int, int, int]  # step, event order in the step, line, column
Predicate = Callable[["View", dict[str, Any]], bool]  # shows the behaviour in these steps, with these params


def by_name(*predicates: Predicate) -> dict[str, Predicate]:
    """A suite's table of predicates, each under its function's name without `p_` (the name a bank gives)."""
    return {p.__name__.removeprefix("p_"): p for p in predicates}


@dataclass
class View:
    """The steps of one trajectory, with each program's flow analysis and the file contents it could know."""

    steps: list[Step]
    evidence: list[CommandEvidence] | None = None  # what each command was recorded doing, when every one was

    @cached_property
    def flows(self) -> list[list[Flow]]:
        contents: dict[str, str] = {}
        out = []
        for step in self.steps:
            programs = step.programs
            if step.tool == "execute" and not programs and python_snippet(step.command):
                programs = [Program(code=step.command, argv=[], stdin=None, order=1)]
            out.append([Flow(p, dict(contents)) for p in programs])
            for event in step.files:
                if event.kind == "write":
                    contents[event.path.removeprefix("./")] = event.content if event.content is not None else ""
                elif event.how == "cat" and step.observation:
                    contents[event.path.removeprefix("./")] = re.sub(r"\n?\[exit_code=\d+\]\s*$", "",
                                                                     step.observation)
            for flow in out[-1]:
                for node, _ in flow.writes(r"."):
                    path = flow.value(node.args[0]) if isinstance(node, ast.Call) and node.args else None
                    if path:
                        contents.pop(path, None)
        return out

    @property
    def notes(self) -> list[str]:
        """What the analysis could not read in these steps (each said once): it shows nothing."""
        found = [n for s in self.steps for n in s.notes]
        found += [u for flows in self.flows for f in flows if (u := f.program.unreadable)]
        return list(dict.fromkeys(found))

    def programs(self) -> list[tuple[Step, Flow]]:
        return [(s, f) for s, flows in zip(self.steps, self.flows, strict=True) for f in flows]


def python_snippet(command: str) -> bool:
    """A command that is itself Python (AppWorld's own `execute` runs Python code), not a shell line."""
    if "<<" in command or not re.match(r"^\s*(?:[A-Za-z_][\w.\[\]'\"]*\s*(?:=|\()|from\s|import\s|for\s|if\s|while\s|"
                                       r"with\s|def\s|try:)", command):
        return False
    return parse_python(command)[0] is not None


def pos(step: Step, flow: Flow | None = None, node: ast.AST | None = None, order: int | None = None) -> Pos:
    if flow is not None:
        line, col = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0)) if node is not None else (0, 0)
        return step.index, flow.program.order, line, col
    return step.index, order or 0, 0, 0


def tool_steps(view: View, names: list[str], arguments: str | None = None) -> list[Pos]:
    """Calls of these h* tools (or their recipes under h) whose sorted JSON arguments match `arguments`."""
    return [pos(s) for s in view.steps if s.tool in names and
            (arguments is None or re.search(arguments, json.dumps(s.arguments, sort_keys=True)))]


def calls_of(view: View, names: set[str], when: Callable[[Flow, ast.Call], bool] | None = None) -> list[Pos]:
    return [pos(s, f, c) for s, f in view.programs() for c in f.calls(names) if when is None or when(f, c)]
