"""Renders the h* bank's scripts (hstar/tools, hstar/checks) from bank_src/.

A bank tool must be one self-contained file: `compile-k` inlines it into a recipe that runs with no
access to the bank or to this package. The sources stay importable and testable here, sharing
ranges.py, values.py and bank_src/common.py; each rendered script carries its own copy of what it
imports from them, imports hoisted, docstrings of the shared code dropped. A test checks that the
shipped scripts are current; `python -m unscaffold.benchmarks.spreadsheet.bankgen` rewrites them.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE = "unscaffold.benchmarks.spreadsheet"
BANK = HERE / "hstar"
SCRIPTS = {
    "tools/inspect_workbook.py": "bank_src/inspect_workbook.py",
    "tools/write_cells.py": "bank_src/write_cells.py",
    "tools/verify_output.py": "bank_src/verify_output.py",
    "checks/prefilled_guard.py": "bank_src/prefilled_guard.py",
    "checks/output_opens.py": "bank_src/output_opens.py",
    "checks/formula_errors.py": "bank_src/formula_errors.py",
    "checks/answer_range.py": "bank_src/answer_range.py",
    "checks/repeated_error.py": "bank_src/repeated_error.py",
    "checks/stall.py": "bank_src/stall.py",
    "checks/turn_budget.py": "bank_src/turn_budget.py",
}
HEADER = "# Self-contained script: the helpers it needs are included below.\n# ruff: noqa"


def _local_imports(tree: ast.Module) -> list[Path]:
    """Files of this package that a module imports from."""
    out = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE + "."):
            out.append(HERE / (node.module[len(PACKAGE) + 1 :].replace(".", "/") + ".py"))
    return out


def _is_hoisted(node: ast.stmt) -> bool:
    return isinstance(node, (ast.Import, ast.ImportFrom))


def _keeps(node: ast.stmt) -> bool:
    """Imports worth hoisting: not __future__ (written once) and not this package (inlined)."""
    if isinstance(node, ast.ImportFrom):
        return node.module != "__future__" and not (node.module or "").startswith(PACKAGE)
    return True


def _without_docstrings(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def _dependencies(path: Path, order: list[Path]) -> list[Path]:
    """The shared files `path` needs, dependencies first (depth-first post-order)."""
    for dep in _local_imports(ast.parse(path.read_text(encoding="utf-8"))):
        if dep not in order:
            _dependencies(dep, order)
            order.append(dep)
    return order


def _bound(node: ast.stmt) -> set[str]:
    """Names a top-level statement defines."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _used(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def render(source: str) -> str:
    """One script: the main file's docstring, hoisted imports, the shared code it uses, the main body."""
    main_path = HERE / source
    text = main_path.read_text(encoding="utf-8")
    main = ast.parse(text)
    pool: list[ast.stmt] = []  # shared top-level statements, in dependency order
    for dep in _dependencies(main_path, []):
        tree = _without_docstrings(ast.parse(dep.read_text(encoding="utf-8")))
        pool += [n for n in tree.body if _keeps(n) or not _is_hoisted(n)]
    lines = text.splitlines()
    drop: set[int] = set()
    docstring = ast.get_docstring(main, clean=False)
    if docstring is not None:
        drop.update(range(main.body[0].lineno - 1, main.body[0].end_lineno or main.body[0].lineno))
    imports: list[str] = []
    for node in main.body:
        if _is_hoisted(node):
            drop.update(range(node.lineno - 1, node.end_lineno or node.lineno))
            if _keeps(node):
                imports.append(ast.unparse(node))
    needed, kept = _used(main), set()
    while True:  # keep only the shared definitions the script reaches
        new = [i for i, n in enumerate(pool) if i not in kept and _bound(n) & needed]
        if not new:
            break
        for i in new:
            kept.add(i)
            needed |= _used(pool[i])
    chosen = [pool[i] for i in sorted(kept)]
    imports += [ast.unparse(n) for n in chosen if _is_hoisted(n)]
    shared = "\n\n".join(ast.unparse(n) for n in chosen if not _is_hoisted(n))
    body = "\n".join(line for i, line in enumerate(lines) if i not in drop).strip()
    unique = sorted(set(imports), key=lambda s: (s.startswith("from"), s))
    parts = [f'"""{docstring}"""' if docstring else "", HEADER, "from __future__ import annotations",
             "\n".join(unique), shared, body]
    return "\n\n".join(p for p in parts if p) + "\n"


def stale(bank: Path = BANK) -> list[str]:
    """Scripts whose shipped text differs from a fresh rendering."""
    return [target for target, source in SCRIPTS.items()
            if not (bank / target).is_file() or (bank / target).read_text(encoding="utf-8") != render(source)]


def write(bank: Path = BANK) -> list[str]:
    """Render every script into the bank; returns the ones that changed."""
    changed = stale(bank)
    for target in changed:
        (bank / target).parent.mkdir(parents=True, exist_ok=True)
        (bank / target).write_text(render(SCRIPTS[target]), encoding="utf-8")
    return changed


if __name__ == "__main__":
    if "--check" in sys.argv[1:]:
        out = stale()
        print("\n".join(out) or "all scripts current")
        sys.exit(1 if out else 0)
    print("\n".join(f"wrote {p}" for p in write()) or "all scripts current")
