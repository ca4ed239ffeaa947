"""The app-world banks' behaviour predicates (appworld_lite's bank, which the real AppWorld suite also
uses): `apis` calls in the student's programs, aliases followed, in order: docs before use, every page
read, writes read back, targets collected, the task completed.

A bank's detector names one by `predicate = "..."`; the suite registry (`unscaffold/suites.py`) finds this
module through the folder's suite.toml (`detectors`) and collects every suite's."""

from __future__ import annotations

import ast
import re
from typing import Any

from unscaffold.behaviors import evidence_view as ev
from unscaffold.behaviors.evidence_view import EPos
from unscaffold.behaviors.predicates import Pos, Predicate, View, by_name, pos, tool_steps
from unscaffold.behaviors.pyflow import Flow, last_name

DOCS = re.compile(r"(?:^|\.)api_docs\.(?:show_api_doc|show_api_descriptions|show_app_descriptions)$")
APP_CALL = re.compile(r"^apis\.(?!api_docs\b)\w+\.\w+$")
READ_API = re.compile(r"^apis\.(?!api_docs\b|supervisor\b)\w+\.show_\w+$")
WRITE_API = re.compile(r"^apis\.(?!api_docs\b)\w+\.(?!show_|search_|login$|complete_task$)\w+$")


def api_calls(view: View) -> list[tuple[Pos, str, ast.Call, Flow]]:
    """Every `apis.<app>.<api>(...)` call the student's programs made, aliases followed, in order."""
    out = []
    for step, flow in view.programs():
        for path, call in flow.call_paths():
            path = re.sub(r"^.*?\bapis\.", "apis.", path) if ".apis." in path or path.startswith("apis.") else path
            if path.startswith("apis."):
                out.append((pos(step, flow, call), path, call, flow))
    return sorted(out, key=lambda c: c[0])


def p_doc_first(view: View, p: dict[str, Any]) -> bool:
    docs = tool_steps(view, ["api_doc"]) + [w for w, path, _, _ in api_calls(view) if DOCS.search(path)]
    apps = [w for w, path, _, _ in api_calls(view) if APP_CALL.match(path)] + \
        tool_steps(view, ["fetch_all_pages", "read_back"])
    if not docs:
        return False
    return not apps or min(docs) < min(apps)


def p_doc_read(view: View, p: dict[str, Any]) -> bool:
    return bool(tool_steps(view, ["api_doc"]) or [1 for _, path, _, _ in api_calls(view)
                                                   if path.endswith("api_docs.show_api_doc")])


def p_pages_read(view: View, p: dict[str, Any]) -> bool:
    end = submitted(view)
    if any(w < end for w in tool_steps(view, ["fetch_all_pages"])):
        return True
    for call in (c for step, flow in view.programs() for c in flow.calls() if pos(step, flow, c) < end):
        values = [k.value for k in call.keywords if k.arg == "page_index"]
        for k in call.keywords:
            if k.arg is None and isinstance(k.value, ast.Dict):
                values += [v for key, v in zip(k.value.keys, k.value.values, strict=True)
                           if isinstance(key, ast.Constant) and key.value == "page_index"]
        if any(not (isinstance(v, ast.Constant) and v.value in (0, None)) for v in values):
            return True
    return False


def submitted(view: View) -> Pos:
    """Where the task was first submitted (`complete_task`): what comes after it no longer counts."""
    return min((w for w, path, _, _ in api_calls(view) if path.endswith(".complete_task")),
               default=(len(view.steps), 0, 0, 0))


def p_read_back(view: View, p: dict[str, Any]) -> bool:
    calls = api_calls(view)
    writes = [w for w, path, _, _ in calls if WRITE_API.match(path)]
    last = max(writes) if writes else (-1, 0, 0, 0)
    reads = [w for w, path, _, _ in calls if READ_API.match(path)] + tool_steps(view, ["read_back"])
    end = submitted(view)
    return any(last < r < end for r in reads)


def p_completed(view: View, p: dict[str, Any]) -> bool:
    submits = [call for _, path, call, _ in api_calls(view) if path.endswith(".complete_task")]
    if p.get("with_answer"):
        return any(call.args or any(k.arg == "answer" and not (isinstance(k.value, ast.Constant) and k.value.value
                                                               is None) for k in call.keywords) for call in submits)
    return bool(submits)


def p_targets_collected(view: View, p: dict[str, Any]) -> bool:
    for _, flow in view.programs():
        for node in flow.nodes:
            if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp) and any(
                    not isinstance(g.iter, ast.Call) or last_name(g.iter.func) not in ("range",)
                    for g in node.generators):
                return True
            if isinstance(node, ast.For) and not (isinstance(node.iter, ast.Call) and
                                                  last_name(node.iter.func) == "range"):
                if any(isinstance(n, ast.Call) and last_name(n.func) in ("append", "add") for n in ast.walk(node)):
                    return True
            if isinstance(node, ast.Call) and last_name(node.func) == "filter" and len(node.args) == 2:
                return True
    return False


PREDICATES: dict[str, Predicate] = by_name(p_doc_first, p_doc_read, p_pages_read, p_read_back, p_completed,
                                           p_targets_collected)


# ---- evidence forms: the app calls the recorded commands made (behaviors/evidence_view.py) ----------------
# The client records each call as `appworld.<app>.<api>` with the API's arguments, however the program spelled
# it (`apis["notes"]`, `getattr`, `**kwargs`, a helper function).

E_DOCS = r"^appworld\.api_docs\.(?:show_api_doc|show_api_descriptions|show_app_descriptions)$"
E_APP = r"^appworld\.(?!api_docs\.)\w+\.\w+$"
E_READ = r"^appworld\.(?!api_docs\.|supervisor\.)\w+\.show_\w+$"
E_WRITE = r"^appworld\.(?!api_docs\.)\w+\.(?!show_|search_|login$|complete_task$)\w+$"
E_SUBMIT = r"^appworld\.supervisor\.complete_task$"


def e_submitted(view: View) -> EPos:
    return min([at for at, _ in ev.calls(view, E_SUBMIT)], default=(1 << 30, 0))


def e_doc_first(view: View, p: dict[str, Any]) -> bool:
    docs = [at for at, _ in ev.calls(view, E_DOCS)] + [at for at, _ in ev.tool_calls(view, {"api_doc"})]
    apps = [at for at, _ in ev.calls(view, E_APP, ok=False)] + [
        at for at, _ in ev.tool_calls(view, {"fetch_all_pages", "read_back"})]
    return bool(docs) and (not apps or min(docs) < min(apps))


def e_doc_read(view: View, p: dict[str, Any]) -> bool:
    return bool(ev.calls(view, r"^appworld\.api_docs\.show_api_doc$") or ev.tool_calls(view, {"api_doc"}))


def _empty(result: object) -> bool:
    return result in ([], {}, "", None) or isinstance(result, dict) and any(
        isinstance(v, list) and not v for v in result.values()) and len(result) == 1


def e_pages_read(view: View, p: dict[str, Any]) -> bool:
    """Before the task was submitted, one list API was fetched page after page (a call without `page_index`
    is page 0) up to a page that came back empty, every page before it fetched."""
    end = e_submitted(view)
    if any(at < end for at, _ in ev.tool_calls(view, {"fetch_all_pages"})):
        return True
    pages: dict[str, dict[int, bool]] = {}
    for at, call in ev.calls(view, E_APP):
        index = call.keywords.get("page_index", 0)
        if at < end and isinstance(index, int) and not isinstance(index, bool) and index >= 0:
            pages.setdefault(call.name, {})[index] = _empty(call.result)
    for fetched in pages.values():
        last = next((i for i in sorted(fetched) if fetched[i]), None)
        if last is not None and last >= 1 and all(i in fetched for i in range(last)):
            return True
    return False


def e_read_back(view: View, p: dict[str, Any]) -> bool:
    writes = [at for at, _ in ev.calls(view, E_WRITE)]
    last = max(writes, default=(-1, -1))
    reads = [at for at, _ in ev.calls(view, E_READ)] + [at for at, _ in ev.tool_calls(view, {"read_back"})]
    end = e_submitted(view)
    return any(last < at < end for at in reads)


def e_completed(view: View, p: dict[str, Any]) -> bool:
    submits = [call for _, call in ev.calls(view, E_SUBMIT)]
    if p.get("with_answer"):
        return any(ev.value_of(call, 0, "answer") is not None for call in submits)
    return bool(submits)


EVIDENCE: dict[str, Predicate] = {"doc_first": e_doc_first, "doc_read": e_doc_read, "pages_read": e_pages_read,
                                  "read_back": e_read_back, "completed": e_completed}
