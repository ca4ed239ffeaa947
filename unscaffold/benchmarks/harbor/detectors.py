"""Behaviour predicates for files in a workspace (the example Harbor banks, `examples/hstar/harbor_bank` and
`words_bank`): files looked at, shown after the last write, ties broken in a sort, a file written at all.

A bank's detector names one by `predicate = "..."`; the suite registry (`unscaffold/suites.py`) finds this
module through the folder's suite.toml (`detectors`) and collects every suite's."""

from __future__ import annotations

import ast
import re
from typing import Any

from unscaffold.behaviors.predicates import Pos, Predicate, View, by_name, pos, tool_steps
from unscaffold.behaviors.pyflow import last_name

LOOK = {"cat", "head", "tail", "nl", "less", "more", "bat", "xxd", "od", "column", "sed", "awk"}
SHOWN = LOOK | {"diff", "cmp", "wc"}


def file_looks(view: View, words: set[str]) -> list[Pos]:
    out = tool_steps(view, ["show_file"])
    for step in view.steps:
        for e in step.files:
            if e.kind == "read" and e.how in words and (e.how != "sed" or any(
                    "-n" in w for w in step.words[e.order - 1][1:2])):
                out.append(pos(step, order=e.order))
    for step, flow in view.programs():
        for call in flow.calls({"read", "read_text", "readlines", "read_csv"}):
            out.append(pos(step, flow, call))
    return sorted(out)


def workspace_writes(view: View) -> list[Pos]:
    out = [pos(s, order=e.order) for s in view.steps for e in s.files if e.kind == "write"]
    for step, flow in view.programs():
        out += [pos(step, flow, node) for node, _ in flow.writes(r".")]
    return sorted(out)


def p_file_looked_at(view: View, p: dict[str, Any]) -> bool:
    return bool(file_looks(view, LOOK))


def p_shown_after_write(view: View, p: dict[str, Any]) -> bool:
    writes = workspace_writes(view)
    last = writes[-1] if writes else (-1, 0, 0, 0)
    return any(s > last for s in file_looks(view, SHOWN))


def p_wrote_file(view: View, p: dict[str, Any]) -> bool:
    """A write seen in a command, or the words bank's `write_line` (its recipe's path is a JSON argument)."""
    return bool(workspace_writes(view) or tool_steps(view, ["write_line"]))


def p_tie_break(view: View, p: dict[str, Any]) -> bool:
    for words in (w for s in view.steps for w in s.words):
        if words and words[0] == "sort" and sum(1 for w in words if w.startswith("-k") or w == "--key") >= 2:
            return True
    for _, flow in view.programs():
        for call in flow.calls({"sorted", "sort", "sort_values", "nlargest", "nsmallest"}):
            for k in call.keywords:
                if k.arg == "key" and isinstance(k.value, ast.Lambda) and isinstance(k.value.body, ast.Tuple) and \
                        len(k.value.body.elts) >= 2:
                    return True
                if k.arg == "key" and isinstance(k.value, ast.Call) and last_name(k.value.func) in (
                        "itemgetter", "attrgetter") and len(k.value.args) >= 2:
                    return True
                if k.arg == "by" and isinstance(k.value, ast.List | ast.Tuple) and len(k.value.elts) >= 2:
                    return True
            if last_name(call.func) == "sort_values" and call.args and isinstance(call.args[0], ast.List) and \
                    len(call.args[0].elts) >= 2:
                return True
    return any(re.search(r"(?is)order\s+by\s+[\w.]+(?:\s+(?:asc|desc))?\s*,\s*\w", f.program.code)
               for _, f in view.programs())


PREDICATES: dict[str, Predicate] = by_name(p_file_looked_at, p_shown_after_write, p_tie_break, p_wrote_file)

# Evidence forms (decide when the trial's commands were recorded; see behaviors/evidence_view.py)
EVIDENCE: dict[str, Predicate] = {}
