"""Renders the h* bank's scripts (hstar/tools, hstar/checks) from bank_src/.

A bank tool must be one self-contained file: `compile-k` inlines it into a recipe that runs with no
access to the bank or to this package. The sources stay importable and testable here, sharing
ranges.py, values.py and bank_src/common.py; each rendered tool carries its own copy of what it
imports from them, imports hoisted, docstrings of the shared code dropped. Checks only ever run from
the mounted bank, so they share one rendered library, `checks/sheetlib.py`, next to them (Python puts
a script's folder on its path). A test checks that the shipped scripts are current;
`python -m unscaffold.benchmarks.spreadsheet.bankgen` rewrites them.
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
LIBRARY = "checks/sheetlib.py"
LIBRARY_HEADER = "# The helpers every check imports, rendered from the package's sources.\n# ruff: noqa"
CHECK_HEADER = "# Rendered from the package's sources; its helpers are in sheetlib.py beside it.\n# ruff: noqa"


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


def _pool(paths: list[Path]) -> list[ast.stmt]:
    """The shared top-level statements the given files need, in dependency order."""
    order: list[Path] = []
    for path in paths:
        _dependencies(path, order)
    pool: list[ast.stmt] = []
    for dep in order:
        tree = _without_docstrings(ast.parse(dep.read_text(encoding="utf-8")))
        pool += [n for n in tree.body if _keeps(n) or not _is_hoisted(n)]
    return pool


def render_library(sources: list[str]) -> str:
    """One module with every shared definition the checks import."""
    pool = _pool([HERE / s for s in sources])
    imports = sorted({ast.unparse(n) for n in pool if _is_hoisted(n)}, key=lambda x: (x.startswith("from"), x))
    shared = "\n\n".join(ast.unparse(n) for n in pool if not _is_hoisted(n))
    return "\n\n".join([LIBRARY_HEADER, "from __future__ import annotations", "\n".join(imports), shared]) + "\n"


def render_check(source: str) -> str:
    """The check's own source, its imports from this package pointed at sheetlib."""
    text = (HERE / source).read_text(encoding="utf-8")
    lines = text.splitlines()
    for node in reversed(ast.parse(text).body):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE + "."):
            names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in node.names)
            lines[node.lineno - 1 : node.end_lineno] = [f"from sheetlib import {names}"]
    body = "\n".join(lines).strip()
    docstring_end = body.index('"""', 3) + 3 if body.startswith('"""') else 0
    return f"{body[:docstring_end]}\n\n{CHECK_HEADER}\n{body[docstring_end:].lstrip()}\n" if docstring_end \
        else f"{CHECK_HEADER}\n{body}\n"


def rendered() -> dict[str, str]:
    """Every file the bank's scripts consist of: target path -> text."""
    checks = [source for target, source in SCRIPTS.items() if target.startswith("checks/")]
    out = {target: render_check(source) if target.startswith("checks/") else render(source)
           for target, source in SCRIPTS.items()}
    out[LIBRARY] = render_library(checks)
    return out


def stale(bank: Path = BANK) -> list[str]:
    """Scripts whose shipped text differs from a fresh rendering."""
    return [target for target, text in rendered().items()
            if not (bank / target).is_file() or (bank / target).read_text(encoding="utf-8") != text]


def write(bank: Path = BANK) -> list[str]:
    """Render every script into the bank; returns the ones that changed."""
    changed = stale(bank)
    texts = rendered()
    for target in changed:
        (bank / target).parent.mkdir(parents=True, exist_ok=True)
        (bank / target).write_text(texts[target], encoding="utf-8")
    return changed


if __name__ == "__main__":
    if "--check" in sys.argv[1:]:
        out = stale()
        print("\n".join(out) or "all scripts current")
        sys.exit(1 if out else 0)
    print("\n".join(f"wrote {p}" for p in write()) or "all scripts current")
