"""An edit applied to a copy of its parent bank, and the unified diff that records it."""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

from unscaffold.evolve.submissions import EditProposal

IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")


def copy_bank(source: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=IGNORE)


def apply_edit(parent: Path, edit: EditProposal, target: Path) -> None:
    """Write the child bank at `target`: the parent's files with the edit's writes and deletes."""
    copy_bank(parent, target)
    for change in edit.changes:
        path = target / change.path
        if change.delete:
            if path.is_file():
                path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        assert change.content is not None
        path.write_text(change.content, encoding="utf-8")


def _text(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines(keepends=True)
    except (FileNotFoundError, UnicodeDecodeError):
        return []


def bank_diff(parent: Path, child: Path) -> str:
    """The edit as a unified diff of the two bank folders (what a reviewer of the evolution reads)."""
    def files(root: Path) -> set[str]:
        return {p.relative_to(root).as_posix() for p in root.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts}

    out: list[str] = []
    for rel in sorted(files(parent) | files(child)):
        a, b = _text(parent / rel), _text(child / rel)
        if a != b:
            out += difflib.unified_diff(a, b, f"a/{rel}", f"b/{rel}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)
