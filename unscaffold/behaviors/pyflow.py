"""Which library calls a Python program made, and on what data: a small taint analysis over its AST.

"Checked the answer with RDKit" means a parse call whose argument comes from reading the answer file,
however the program names its variables, wraps the read in a function or splits it over lines; an
import that is never called, or a call on a literal that is not the answer, does not count. A value
reaches a name through assignments, loops, comprehensions, `with ... as` and function parameters."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property

from unscaffold.behaviors.program import Program, check_time

Source = Callable[[ast.AST], bool]
WRITE_MODES = re.compile(r"[wax+]")
# `$(cat FILE)`, `$(< FILE)` or `` `cat FILE` `` inside a string: the operand stops at the next `)`, `$(` or
# backquote, so the scans never overlap and the search stays linear in the string's length.
SUBSTITUTED_READ = re.compile(r"(?:\$\(\s*(?:cat\s+|<\s*)|`cat\s+)((?:[^)$`]|\$(?!\())*)")


def last_name(func: ast.AST) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


@dataclass
class Flow:
    """One program's calls, string values and data flow."""

    program: Program
    contents: dict[str, str] = field(default_factory=dict)  # file -> what the shell last wrote there

    @cached_property
    def tree(self) -> ast.Module | None:
        return self.program.tree

    @cached_property
    def nodes(self) -> list[ast.AST]:
        return list(ast.walk(self.tree)) if self.tree else []

    @cached_property
    def strings(self) -> dict[str, str]:
        """Names bound once to a string this program can spell out (paths kept in variables)."""
        seen: dict[str, list[ast.AST]] = {}
        for node in self.nodes:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                seen.setdefault(node.targets[0].id, []).append(node.value)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple) \
                    and isinstance(node.value, ast.Tuple) and len(node.value.elts) == len(node.targets[0].elts):
                for target, value in zip(node.targets[0].elts, node.value.elts, strict=True):
                    if isinstance(target, ast.Name):
                        seen.setdefault(target.id, []).append(value)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple) \
                    and isinstance(node.value, ast.Subscript) and self.is_argv(node.value.value) and \
                    isinstance(node.value.slice, ast.Slice):  # `src, dst, rng = sys.argv[1:4]`
                lower = node.value.slice.lower
                start = lower.value if isinstance(lower, ast.Constant) and isinstance(lower.value, int) else 0
                for k, target in enumerate(node.targets[0].elts):
                    if isinstance(target, ast.Name):
                        seen.setdefault(target.id, []).append(ast.Subscript(value=node.value.value,
                                                                            slice=ast.Constant(start + k)))
        out: dict[str, str] = {}
        for _ in range(3):
            for name, values in seen.items():
                if len(values) == 1:
                    text = self.value(values[0], out)
                    if text is not None:
                        out[name] = text
        return out

    def value(self, node: ast.AST | None, names: dict[str, str] | None = None) -> str | None:
        """The string an expression evaluates to, where literals, joins and argv tell it."""
        names = self.strings if names is None else names
        if node is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return names.get(node.id)
        if isinstance(node, ast.JoinedStr):
            parts = [self.value(v.value if isinstance(v, ast.FormattedValue) else v, names) for v in node.values]
            return "".join(p if p is not None else "*" for p in parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Div)):
            left, right = self.value(node.left, names), self.value(node.right, names)
            if left is not None and right is not None:
                return left + ("/" if isinstance(node.op, ast.Div) else "") + right
        if isinstance(node, ast.Call) and last_name(node.func) in ("join", "Path", "PurePath") and node.args:
            parts = [self.value(a, names) for a in node.args]
            if all(p is not None for p in parts):
                return "/".join(p for p in parts if p)
        if isinstance(node, ast.Subscript) and self.is_argv(node.value):
            index = node.slice.value if isinstance(node.slice, ast.Constant) else None
            if isinstance(index, int) and 1 <= index <= len(self.program.argv):
                return self.program.argv[index - 1]
        return None

    @staticmethod
    def is_argv(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "argv" or isinstance(node, ast.Name) and \
            node.id == "argv"

    # ---- calls ----------------------------------------------------------------------------------------

    def calls(self, names: set[str] | None = None) -> list[ast.Call]:
        """Calls of functions or methods with these names (any, when None), in source order."""
        found = [n for n in self.nodes if isinstance(n, ast.Call) and (names is None or self.call_name(n) & names)]
        return sorted(found, key=position)

    def call_name(self, call: ast.Call) -> set[str]:
        """The called name, and what an imported alias stands for (`lw` for `load_workbook as lw`)."""
        name = last_name(call.func)
        alias = self.imported.get(name) if isinstance(call.func, ast.Name) else None
        return {name, alias} if alias else {name}

    @cached_property
    def imported(self) -> dict[str, str]:
        return {a.asname: a.name.rsplit(".", 1)[-1] for n in self.nodes if isinstance(n, ast.Import | ast.ImportFrom)
                for a in n.names if a.asname}

    def called(self, names: set[str]) -> bool:
        """Some call of these names (a program that does not parse never ran, so it calls nothing)."""
        return bool(self.calls(names))

    @cached_property
    def aliases(self) -> dict[str, str]:
        """Names standing for a dotted path (`a = apis.notes`, `from apis import apis as x`)."""
        out: dict[str, str] = {}
        for node in self.nodes:
            if isinstance(node, ast.ImportFrom | ast.Import):
                for alias in node.names:
                    if alias.asname:
                        out[alias.asname] = alias.name
        for _ in range(3):
            for node in self.nodes:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    path = self.dotted(node.value, out)
                    if path and path != node.targets[0].id:
                        out[node.targets[0].id] = path
        return out

    def dotted(self, node: ast.AST, aliases: dict[str, str] | None = None) -> str | None:
        """`apis.notes.login` for an attribute chain, following aliases and `getattr(x, 'name')`."""
        aliases = self.aliases if aliases is None else aliases
        if isinstance(node, ast.Name):
            return aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value, aliases)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call) and last_name(node.func) == "getattr" and len(node.args) >= 2:
            base, attr = self.dotted(node.args[0], aliases), self.value(node.args[1])
            return f"{base}.{attr}" if base and attr else None
        return None

    def call_paths(self) -> list[tuple[str, ast.Call]]:
        return [(p, c) for c in self.calls() if (p := self.dotted(c.func))]

    # ---- data flow ------------------------------------------------------------------------------------

    def reads_file(self, pattern: str) -> Source:
        """A source: an expression that reads a file whose name matches `pattern` (or its known text)."""
        content = next((c.strip() for f, c in self.contents.items() if re.search(pattern, f) and c.strip()), None)
        parts = set(content.split(".")) if content else set()
        stdin = self.program.stdin is not None and re.search(pattern, self.program.stdin)

        def source(node: ast.AST) -> bool:
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if any(re.search(pattern, m.group(1).strip()) for m in SUBSTITUTED_READ.finditer(node.value)):
                    return True
                return bool(content) and (node.value.strip() == content or node.value.strip() in parts)
            if isinstance(node, ast.Call):
                name = last_name(node.func)
                if name in ("save", "write_text", "write", "to_excel", "to_csv", "copy", "copyfile", "move"):
                    return False
                if name == "open" and self.open_mode_writes(node):
                    return False
                args = [*node.args, *(k.value for k in node.keywords)]
                if any((v := self.value(a)) is not None and re.search(pattern, v) for a in args):
                    return True
                if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Call):
                    return source(node.func.value)  # Path('answer.txt').read_text()
                if stdin and name in ("input", "read", "readline", "readlines") and (
                        name == "input" or "stdin" in ast.unparse(node.func)):
                    return True
            if stdin and isinstance(node, ast.Attribute) and node.attr == "stdin":
                return True
            if isinstance(node, ast.Subscript) and self.is_argv(node.value):
                v = self.value(node)
                return v is not None and bool(re.search(pattern, v))
            return False

        return source

    @staticmethod
    def open_mode_writes(node: ast.Call) -> bool:
        mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
        return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and bool(WRITE_MODES.search(mode.value))

    def calls_source(self, names: set[str]) -> Source:
        """A source: the result of calling one of these functions."""
        return lambda node: isinstance(node, ast.Call) and bool(self.call_name(node) & names)

    def bindings(self) -> Iterator[tuple[ast.AST, ast.AST]]:
        """(target, value) for everything that binds a name."""
        for node in self.nodes:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    yield t, node.value
            elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr) and node.value is not None:
                yield node.target, node.value
            elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
                yield node.target, node.iter
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                yield node.optional_vars, node.context_expr
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("append", "add", "extend", "update", "insert"):
                for a in node.args:
                    yield node.func.value, a
        functions = {n.name: n for n in self.nodes if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        for call in self.calls():
            fn = functions.get(last_name(call.func)) if isinstance(call.func, ast.Name) else None
            if fn is not None:
                params = [a.arg for a in fn.args.args]
                for p, a in zip(params, call.args, strict=False):
                    yield ast.Name(id=p, ctx=ast.Store()), a
                for k in call.keywords:
                    if k.arg in params:
                        yield ast.Name(id=k.arg, ctx=ast.Store()), k.value
                for ret in (n for n in ast.walk(fn) if isinstance(n, ast.Return)):
                    if ret.value is not None:
                        yield ast.Name(id=f"{fn.name}()", ctx=ast.Store()), ret.value

    def tainted(self, source: Source) -> set[str]:
        names: set[str] = set()
        pairs = list(self.bindings())
        for _ in range(8):
            before = len(names)
            check_time()
            for target, value in pairs:
                if self.reaches(value, source, names):
                    names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
            if len(names) == before:
                break
        return names

    def reaches(self, node: ast.AST, source: Source, names: set[str]) -> bool:
        for n in ast.walk(node):
            if source(n) or isinstance(n, ast.Name) and n.id in names:
                return True
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and f"{n.func.id}()" in names:
                return True
        return False

    def call_on(self, names: set[str], source: Source) -> list[ast.Call]:
        """Calls of these functions with an argument (or receiver) that the source reaches."""
        if self.tree is None:
            return []
        tainted = self.tainted(source)
        out = []
        for call in self.calls(names):
            args = [*call.args, *(k.value for k in call.keywords)]
            if isinstance(call.func, ast.Attribute):
                args.append(call.func.value)
            if any(self.reaches(a, source, tainted) for a in args):
                out.append(call)
        return out

    # ---- writes ---------------------------------------------------------------------------------------

    def writes(self, pattern: str) -> list[tuple[ast.AST, list[ast.AST]]]:
        """(where, what it wrote) for each write of a file whose name matches `pattern`."""
        if self.tree is None:
            return []
        handles: set[str] = set()
        out: list[tuple[ast.AST, list[ast.AST]]] = []

        def names_file(call: ast.Call, index: int = 0) -> bool:
            args = [*call.args, *(k.value for k in call.keywords)]
            return len(args) > index and (v := self.value(args[index])) is not None and bool(re.search(pattern, v))

        for node in self.nodes:
            if isinstance(node, ast.withitem) and isinstance(node.context_expr, ast.Call) and \
                    last_name(node.context_expr.func) == "open" and self.open_mode_writes(node.context_expr) and \
                    names_file(node.context_expr) and isinstance(node.optional_vars, ast.Name):
                handles.add(node.optional_vars.id)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                    last_name(node.value.func) == "open" and self.open_mode_writes(node.value) and \
                    names_file(node.value):
                handles |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for call in self.calls():
            name = last_name(call.func)
            receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
            if name in ("write", "writelines") and receiver is not None and (
                    isinstance(receiver, ast.Name) and receiver.id in handles or
                    isinstance(receiver, ast.Call) and last_name(receiver.func) == "open" and
                    self.open_mode_writes(receiver) and names_file(receiver)):
                out.append((call, list(call.args)))
            elif name == "print" and any(k.arg == "file" and isinstance(k.value, ast.Name) and k.value.id in handles
                                         for k in call.keywords):
                out.append((call, list(call.args)))
            elif name in ("write_text", "write_bytes") and receiver is not None and (
                    (v := self.value(receiver)) is not None and re.search(pattern, v) or
                    isinstance(receiver, ast.Call) and names_file(receiver)):
                out.append((call, list(call.args)))
            elif name in ("save", "to_excel", "to_csv", "dump") and (names_file(call) or names_file(call, 1)):
                out.append((call, [receiver] if receiver is not None else list(call.args)))
            elif name in ("copy", "copyfile", "copy2", "move") and names_file(call, 1):
                out.append((call, list(call.args[:1])))
        return sorted(out, key=lambda w: position(w[0]))
