"""The package's import graph has no cycle and no library module imports a command module.

Every import statement counts, those inside functions too: a deferred import hides a cycle from the
interpreter, not from the design (the two modules still cannot be understood or moved apart). Only
imports under `if TYPE_CHECKING:` are left out, since they never run."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "unscaffold"
COMMAND_MODULES = {"unscaffold.cli", "unscaffold.rescue.cli", "unscaffold.sft.cli"}


def module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith("TYPE_CHECKING")


def imported(tree: ast.Module, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The package's modules `tree` imports (a name imported from a module is that module, unless it is
    itself a module)."""

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    found: set[str] = set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if _type_checking_only(node):
            continue
        if isinstance(node, ast.Import):
            found |= {m for a in node.names if (m := resolve(a.name))}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                here = here[:len(here) - node.level + 1]
                base = ".".join([*here, base] if base else here)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found |= {m for m in ((target if target in known else resolve(base)),) if m}
        stack.extend(ast.iter_child_nodes(node))
    found.discard(module)
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    files = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    known = set(files)
    return {m: imported(ast.parse(p.read_text()), m, p.name == "__init__.py", known) for m, p in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as the path a -> ... -> a, or None (iterative depth-first search, three colours)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(graph):
        if root in state:
            continue
        path = [root]
        todo = [iter(sorted(graph[root]))]
        state[root] = 1
        while todo:
            nxt = next(todo[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                todo.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                todo.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_the_package_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph(PACKAGE))
    assert cycle is None, " -> ".join(cycle or [])


def test_no_library_module_imports_a_command_module() -> None:
    graph = import_graph(PACKAGE)
    assert COMMAND_MODULES <= set(graph)
    offenders = sorted(f"{m} -> {t}" for m, targets in graph.items() if m not in COMMAND_MODULES
                       for t in targets & COMMAND_MODULES)
    assert offenders == []


def test_the_graph_sees_deferred_relative_and_type_only_imports(tmp_path: Path) -> None:
    """The checks above can fail: a cycle through a function-level import is found, a relative import
    resolves, and an import that only the type checker sees is not an edge."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from ..c import g\n    return g\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n"
                                  "def g():\n    import pkg.a\n")
    graph = import_graph(package)
    assert graph == {"pkg": set(), "pkg.a": {"pkg.sub.b"}, "pkg.c": {"pkg.a"}, "pkg.sub": set(),
                     "pkg.sub.b": {"pkg.c"}}
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n")
    assert find_cycle(import_graph(package)) is None


def test_the_behaviour_layer_imports_no_suite_and_the_bank_loader_no_behaviour() -> None:
    """Detectors reach each suite's predicates through the registry (unscaffold/suites.py), and the bank loader
    reads `DetectorSpec` from its own module, so neither depends on a suite or on the other."""
    graph = import_graph(PACKAGE)
    suites = ("unscaffold.benchmarks", "unscaffold.offline")
    offenders = sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets
                       if (m.startswith("unscaffold.behaviors") and t.startswith(suites))
                       or (m == "unscaffold.suites" and t.startswith(suites))
                       or (m.startswith("unscaffold.knowledge") and t.startswith("unscaffold.behaviors")))
    assert offenders == []
    assert "unscaffold.suites" in graph["unscaffold.behaviors.detector"]
