"""The spreadsheet bank's behaviour predicates: which workbooks the student's programs open, write and
assert on, in order (a check before the last save does not count, for the tool as for a command).

A bank's detector names one by `predicate = "..."`; the suite registry (`unscaffold/suites.py`) finds this
module through the folder's suite.toml (`detectors`) and collects every suite's."""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Callable
from typing import Any

from unscaffold.behaviors import evidence_view as ev
from unscaffold.behaviors.evidence_view import EPos
from unscaffold.behaviors.predicates import Pos, Predicate, View, by_name, pos, tool_steps
from unscaffold.behaviors.pyflow import Flow, last_name

INPUT = r"(?:^|/)spreadsheets/|_input\.xlsx$"
OUTPUT = r"(?:^|/)output/|_output\.xlsx$"
LOADS = {"load_workbook", "read_excel", "ExcelFile", "loads"}
SAVES = {"save", "to_excel"}
SHEET_LOOKS = {"sheetnames", "worksheets", "iter_rows", "rows", "values", "dimensions", "max_row", "max_column",
               "iter_cols", "columns", "cell", "calculate_dimension"}
BOUNDS = {"max_row", "max_column", "min_row", "min_column", "dimensions", "iter_rows", "iter_cols",
          "calculate_dimension", "rows", "columns"}
CONVERSIONS = {"float", "int", "strptime", "datetime", "date", "timedelta", "Decimal", "to_datetime",
               "fromisoformat", "to_numeric", "round"}
BUILTINS = set(dir(builtins))
ERROR_TEXT = re.compile(r"^#(?:DIV/0!?|REF!?|NAME\??|VALUE!?|N/A|NUM!?|NULL!?)?$|ERROR_LITERAL")


def loads(flow: Flow, pattern: str | None = None) -> list[ast.Call]:
    """Calls opening a workbook (openpyxl, pandas, formulas) on a path matching `pattern` (any, when None)."""
    out = []
    for call in flow.calls(LOADS):
        args = [*call.args, *(k.value for k in call.keywords if k.arg in (None, "filename", "io", "path"))]
        path = next((v for a in args if (v := flow.value(a)) is not None), None)
        if pattern is None or path is not None and re.search(pattern, path):
            out.append(call)
    return out


def attributes(flow: Flow, names: set[str]) -> list[ast.Attribute]:
    return [n for n in flow.nodes if isinstance(n, ast.Attribute) and n.attr in names]


def wb_writes(view: View) -> list[Pos]:
    """Saves of a workbook: a program's save or to_excel, the write tool, a copy or conversion into place."""
    out = tool_steps(view, ["write_cells"])
    for step, flow in view.programs():
        out += [pos(step, flow, c) for c in flow.calls(SAVES)]
    for step in view.steps:
        out += [pos(step, order=e.order) for e in step.files if e.kind == "write" and e.path.endswith(".xlsx")]
    return sorted(out)


def after_last_write(view: View, found: list[Pos]) -> bool:
    writes = wb_writes(view)
    last = writes[-1] if writes else (-1, 0, 0, 0)
    return any(f > last for f in found)


def asserts(flow: Flow) -> bool:
    """The program fails loudly when its check fails: an assert, a raise, or an exit with a status."""
    return any(isinstance(n, ast.Assert | ast.Raise) for n in flow.nodes) or any(
        c.args for c in flow.calls({"exit"}))


def inspections(view: View) -> list[Pos]:
    out = tool_steps(view, ["inspect_workbook"])
    for step, flow in view.programs():
        if loads(flow) and flow.called({"print"}):
            books = flow.tainted(flow.calls_source(LOADS))
            looks = attributes(flow, SHEET_LOOKS) + flow.calls({"read_excel"}) + [
                n for n in flow.nodes if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and
                n.value.id in books]
            out += [pos(step, flow, min(looks, key=lambda n: (n.lineno, n.col_offset)))] if looks else []
    return sorted(out)


def before_first_write(view: View, found: list[Pos]) -> bool:
    writes = wb_writes(view)
    return bool(found) and (not writes or min(found) < writes[0])


def p_inspected_before_write(view: View, p: dict[str, Any]) -> bool:
    return before_first_write(view, inspections(view))


def p_sheets_walked(view: View, p: dict[str, Any]) -> bool:
    found = tool_steps(view, ["inspect_workbook"])
    for step, flow in view.programs():
        books = flow.tainted(flow.calls_source({"load_workbook"}))
        for node in flow.nodes:
            if isinstance(node, ast.For | ast.comprehension):
                it = node.iter
                if isinstance(it, ast.Attribute) and it.attr in ("worksheets", "sheetnames") or \
                        isinstance(it, ast.Name) and it.id in books and it.id not in {
                            t.id for t in ast.walk(node.target) if isinstance(t, ast.Name)}:
                    found.append(pos(step, flow, it))
        for call in flow.calls({"read_excel"}):
            if any(k.arg == "sheet_name" and isinstance(k.value, ast.Constant) and k.value.value is None
                   for k in call.keywords):
                found.append(pos(step, flow, call))
    return before_first_write(view, sorted(found))


def empty_tests(flow: Flow) -> list[ast.Compare | ast.UnaryOp]:
    """Tests of a cell's value for emptiness: `v is None`, `v in (None, "")`, `not cell.value`."""
    out: list[ast.Compare | ast.UnaryOp] = []
    for node in flow.nodes:
        if isinstance(node, ast.Compare) and any(
                isinstance(c, ast.Constant) and c.value in (None, "") or
                isinstance(c, ast.Tuple | ast.List | ast.Set) and any(
                    isinstance(e, ast.Constant) and e.value in (None, "") for e in c.elts)
                for c in [node.left, *node.comparators]):
            out.append(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and isinstance(node.operand, ast.Attribute) \
                and node.operand.attr == "value":
            out.append(node)
    return out


def cell_writes(flow: Flow) -> list[tuple[ast.AST, ast.AST]]:
    """(target, value) of assignments into cells: `ws["D2"] = v`, `cell.value = v`, `ws.cell(r, c, value=v)`."""
    out: list[tuple[ast.AST, ast.AST]] = []
    for node in flow.nodes:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Attribute) and t.attr == "value" or isinstance(t, ast.Subscript) and \
                        _sheet_like(flow, t.value):
                    out.append((t, node.value))
    for call in flow.calls({"cell"}):
        out += [(call, k.value) for k in call.keywords if k.arg == "value"]
        if len(call.args) >= 3:
            out.append((call, call.args[2]))
    return out


def _sheet_like(flow: Flow, node: ast.AST) -> bool:
    names = flow.tainted(flow.calls_source({"load_workbook", "Workbook", "create_sheet"}))
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node)) or \
        isinstance(node, ast.Attribute) and node.attr == "active"


def _cell_key(flow: Flow, node: ast.AST) -> str:
    """The cell an expression stands for, spelled the same for `ws.cell(r, 4).value`, `ws.cell(r, 4, value=v)`
    and a name bound once to either."""
    if isinstance(node, ast.Attribute) and node.attr == "value":
        node = node.value
    if isinstance(node, ast.Name):
        bound = [n.value for n in flow.nodes if isinstance(n, ast.Assign) and len(n.targets) == 1 and
                 isinstance(n.targets[0], ast.Name) and n.targets[0].id == node.id]
        if len(bound) == 1:
            node = bound[0]
    if isinstance(node, ast.Attribute) and node.attr == "value":
        node = node.value
    if isinstance(node, ast.Call) and last_name(node.func) == "cell":
        node = ast.Call(func=node.func, args=node.args[:2], keywords=[k for k in node.keywords
                                                                       if k.arg in ("row", "column")])
    return ast.dump(node)


def p_prefilled_kept(view: View, p: dict[str, Any]) -> bool:
    """Cells written only where the same cell was found empty first (or the write tool, which keeps them)."""
    if any(s.tool == "write_cells" and not s.arguments.get("overwrite") for s in view.steps):
        return True
    for _, flow in view.programs():
        tested = set()
        for test in empty_tests(flow):
            operands = [test.operand] if isinstance(test, ast.UnaryOp) else [test.left, *test.comparators]
            tested |= {_cell_key(flow, o) for o in operands if not isinstance(o, ast.Constant | ast.Tuple | ast.List)}
        if tested & {_cell_key(flow, target) for target, _ in cell_writes(flow)}:
            return True
    return False


def both_books(flow: Flow) -> bool:
    return bool(loads(flow, INPUT)) and bool(loads(flow, OUTPUT))


def p_compared_after_write(view: View, p: dict[str, Any]) -> bool:
    found = tool_steps(view, ["verify_output"]) + [pos(s, f, loads(f)[-1]) for s, f in view.programs()
                                                   if both_books(f) and not f.calls(SAVES)]
    return after_last_write(view, found)


def p_prefilled_asserted(view: View, p: dict[str, Any]) -> bool:
    found = tool_steps(view, ["verify_output"])
    for step, flow in view.programs():
        if not both_books(flow) or not asserts(flow):
            continue
        src, out = flow.tainted(flow.reads_file(INPUT)), flow.tainted(flow.reads_file(OUTPUT))
        for node in flow.nodes:
            if isinstance(node, ast.Compare) and any(isinstance(o, ast.Eq | ast.NotEq | ast.IsNot | ast.Is)
                                                     for o in node.ops):
                sides = [node.left, *node.comparators]
                if any(flow.reaches(a, flow.reads_file(INPUT), src) for a in sides) and \
                        any(flow.reaches(a, flow.reads_file(OUTPUT), out) for a in sides):
                    found.append(pos(step, flow, node))
    return after_last_write(view, found)


def p_output_reopened(view: View, p: dict[str, Any]) -> bool:
    found = tool_steps(view, ["verify_output"]) + [pos(s, f, c) for s, f in view.programs() for c in loads(f, OUTPUT)]
    return after_last_write(view, found)


def p_asserted_after_write(view: View, p: dict[str, Any]) -> bool:
    found = tool_steps(view, ["verify_output"]) + [pos(s, f, loads(f, OUTPUT)[-1]) for s, f in view.programs()
                                                   if loads(f, OUTPUT) and asserts(f)]
    return after_last_write(view, found)


def p_error_values_sought(view: View, p: dict[str, Any]) -> bool:
    if tool_steps(view, ["verify_output"]):
        return True
    for _, flow in view.programs():
        if not (loads(flow) or flow.called({"calculate", "ExcelModel"})):
            continue
        if any(isinstance(n, ast.Constant) and isinstance(n.value, str) and ERROR_TEXT.search(n.value.strip())
               for n in flow.nodes if not _in_print(flow, n)):
            return True
    return False


def _in_print(flow: Flow, node: ast.AST) -> bool:
    return any(node in list(ast.walk(c)) for c in flow.calls({"print"}))


def p_inspected_after_error(view: View, p: dict[str, Any]) -> bool:
    error = re.compile(r"(?m)^\w*(?:Error|Exception)\b")
    first = next((s.index for s in view.steps if error.search(s.observation)), None)
    if first is None:
        return False
    looks = tool_steps(view, ["inspect_workbook"]) + [
        pos(s, f) for s, f in view.programs() if loads(f) and attributes(f, SHEET_LOOKS)]
    return any(w[0] > first for w in looks)


def p_examples_read(view: View, p: dict[str, Any]) -> bool:
    """Before the first write, the filled-in cells were told apart from the empty ones (or the inspecting
    tool classified the answer range): the examples were looked for."""
    found = tool_steps(view, ["inspect_workbook"], r'"answer_position"')
    for step, flow in view.programs():
        if not loads(flow):
            continue
        found += [pos(step, flow, node) for node in empty_tests(flow)]
        found += [pos(step, flow, node) for node in flow.nodes
                  if isinstance(node, ast.If | ast.IfExp | ast.comprehension) and _truthy_cell(node)]
    return before_first_write(view, sorted(found))


def _truthy_cell(node: ast.If | ast.IfExp | ast.comprehension) -> bool:
    tests = node.ifs if isinstance(node, ast.comprehension) else [node.test]
    for t in tests:
        parts = t.values if isinstance(t, ast.BoolOp) else [t]
        if any(isinstance(v, ast.Attribute) and v.attr == "value" or isinstance(v, ast.Name) for v in parts):
            return True
    return False


def p_rule_checked(view: View, p: dict[str, Any]) -> bool:
    """The program's own rule (a function it defines or was given, not a library call) compared with values."""
    for _, flow in view.programs():
        imported = {a.asname or a.name.split(".")[0] for n in flow.nodes if isinstance(n, ast.Import | ast.ImportFrom)
                    for a in n.names}
        defined = {c.func.id for c in flow.calls() if isinstance(c.func, ast.Name)} - imported - BUILTINS
        for node in flow.nodes:
            if isinstance(node, ast.Compare) and any(isinstance(o, ast.Eq | ast.NotEq) for o in node.ops):
                sides = [node.left, *node.comparators]
                ruled = [s for s in sides if any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and
                                                 c.func.id in defined for c in ast.walk(s))]
                others = [s for s in sides if s not in ruled and not (isinstance(s, ast.Constant) and s.value is None)]
                if ruled and others:
                    return True
    return False


def _tool_or_program(view: View, program: Callable[[Flow], bool]) -> bool:
    """The write_cells tool saves the output in place itself, so a call of it shows every kind of save;
    without one, some program must show it."""
    return bool(tool_steps(view, ["write_cells"])) or any(program(flow) for _, flow in view.programs())


def _saves_to_output(flow: Flow) -> bool:
    return any(any((v := flow.value(a)) is not None and re.search(OUTPUT, v)
                   for a in [*call.args, *(k.value for k in call.keywords)]) for call in flow.calls(SAVES))


def p_saved_to_output(view: View, p: dict[str, Any]) -> bool:
    return _tool_or_program(view, _saves_to_output) or any(
        e.kind == "write" and re.search(OUTPUT, e.path) and e.path.endswith(".xlsx")
        for s in view.steps for e in s.files)


def p_recalculated(view: View, p: dict[str, Any]) -> bool:
    for step in view.steps:
        if any(w and w[0].rsplit("/", 1)[-1] in ("soffice", "libreoffice", "localc") and
               any(a.startswith("--convert-to") or a == "--headless" for a in w) for w in step.words):
            return True
    for _, flow in view.programs():
        if flow.called({"ExcelModel"}) or flow.called({"calculate"}) and "formulas" in flow.program.code:
            return True
        for call in flow.calls({"run", "call", "check_call", "check_output", "Popen"}):
            if any(isinstance(n, ast.Constant) and n.value in ("soffice", "libreoffice") for n in ast.walk(call)):
                return True
    return False


def _saves_a_loaded_book(flow: Flow) -> bool:
    loads = flow.calls_source({"load_workbook"})
    books = flow.tainted(loads)
    return any(isinstance(call.func, ast.Attribute) and flow.reaches(call.func.value, loads, books)
               for call in flow.calls({"save"}))


def p_edited_in_place(view: View, p: dict[str, Any]) -> bool:
    return _tool_or_program(view, _saves_a_loaded_book)


def p_literal_values(view: View, p: dict[str, Any]) -> bool:
    for step in view.steps:
        if step.tool == "write_cells" and any(not isinstance(v, str) or isinstance(v, dict)
                                              for v in (step.arguments.get("values") or {}).values()):
            return True
    for _, flow in view.programs():
        converted = flow.calls_source(CONVERSIONS)
        names = flow.tainted(converted)
        if any(flow.reaches(value, converted, names) for _, value in cell_writes(flow)):
            return True
    return False


def p_sheet_bounds(view: View, p: dict[str, Any]) -> bool:
    return any(loads(f) and attributes(f, BOUNDS) or f.calls({"iter_rows", "iter_cols", "calculate_dimension"})
               for _, f in view.programs())


def p_first_sheet(view: View, p: dict[str, Any]) -> bool:
    for _, flow in view.programs():
        for node in flow.nodes:
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and \
                    node.value.attr in ("worksheets", "sheetnames") and isinstance(node.slice, ast.Constant) and \
                    node.slice.value == 0:
                return True
        if any(k.arg == "sheet_name" and isinstance(k.value, ast.Constant) and k.value.value == 0
               for c in flow.calls({"read_excel"}) for k in c.keywords):
            return True
    return False


PREDICATES: dict[str, Predicate] = by_name(p_inspected_before_write, p_sheets_walked, p_prefilled_kept,
                                           p_compared_after_write, p_prefilled_asserted, p_output_reopened,
                                           p_asserted_after_write, p_error_values_sought, p_inspected_after_error,
                                           p_examples_read, p_rule_checked, p_saved_to_output, p_recalculated,
                                           p_edited_in_place, p_literal_values, p_sheet_bounds, p_first_sheet)


# ---- evidence forms: which workbooks the recorded commands wrote and loaded (behaviors/evidence_view.py) ----
# openpyxl's load_workbook and pandas' read_excel are recorded with the path they received, in any spelling.

E_LOADS = r"^(?:openpyxl\.load_workbook|pandas\.read_excel)$"
E_OUTPUT_BOOK = r"(?:^|/)output/[^/]*\.xlsx$|_output\.xlsx$"
E_INPUT_BOOK = r"(?:^|/)spreadsheets/[^/]*\.xlsx$|_input\.xlsx$"


def e_book_writes(view: View) -> list[EPos]:
    """Writes of the output workbook (a save, a copy or a conversion into place), and the write tool's calls."""
    return sorted([at for at, _ in ev.writes(view, E_OUTPUT_BOOK)] +
                  [at for at, _ in ev.tool_calls(view, {"write_cells"})])


def e_loads(view: View, book: str) -> list[EPos]:
    out = []
    for at, call in ev.calls(view, E_LOADS):
        path = ev.value_of(call, 0, "filename", "io", "path")
        if isinstance(path, str) and re.search(book, path.removeprefix("./")):
            out.append(at)
    return out


def _after_last_book_write(view: View, found: list[EPos]) -> bool:
    writes = e_book_writes(view)
    return bool(writes) and any(f > writes[-1] for f in found)


def e_output_reopened(view: View, p: dict[str, Any]) -> bool:
    """After the output workbook's last write, it was loaded again (openpyxl or pandas) in a command that had not
    failed by then, or checked by the verifying tool."""
    return _after_last_book_write(view, e_loads(view, E_OUTPUT_BOOK) + [
        at for at, _ in ev.tool_calls(view, {"verify_output"})])


def e_compared_after_write(view: View, p: dict[str, Any]) -> bool:
    """After the last write, both the input and the output workbook were loaded (in one program, or in two whose
    dumps were then compared)."""
    writes = e_book_writes(view)
    last = writes[-1] if writes else None
    if last is None:
        return False
    if any(at > last for at, _ in ev.tool_calls(view, {"verify_output"})):
        return True
    return any(at > last for at in e_loads(view, E_INPUT_BOOK)) and any(at > last for at in
                                                                         e_loads(view, E_OUTPUT_BOOK))


def e_saved_to_output(view: View, p: dict[str, Any]) -> bool:
    return bool(e_book_writes(view))


def e_recalculated(view: View, p: dict[str, Any]) -> bool:
    return any(any(a.startswith("--convert-to") or a == "--headless" for a in argv)
               for _, argv in ev.execs(view, {"soffice", "libreoffice", "localc", "soffice.bin"}))


EVIDENCE: dict[str, Predicate] = {"output_reopened": e_output_reopened, "compared_after_write": e_compared_after_write,
                                  "saved_to_output": e_saved_to_output, "recalculated": e_recalculated}
