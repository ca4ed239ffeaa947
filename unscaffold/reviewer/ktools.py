"""Read-only access to K for an LLM reviewer when K is too large to inline: ls, read, grep.

Every path is resolved inside K; anything that leaves it is refused. Outputs are capped so a
look-up never floods the reviewer's context."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from unscaffold.knowledge.kfolder import K

MAX_OUTPUT = 12_000
MAX_LS = 200
MAX_GREP = 100


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


PATH = {"type": "string", "description": "a path relative to the reference root"}
SCHEMAS: list[dict[str, Any]] = [
    _fn("ls", "List the files under a folder of the reference (recursively, with sizes).",
        {"path": {**PATH, "default": "."}}, []),
    _fn("read", f"Read a reference file (at most {MAX_OUTPUT} characters from `offset`).",
        {"path": PATH, "offset": {"type": "integer", "minimum": 0, "default": 0}}, ["path"]),
    _fn("grep", "Search reference files for a regular expression (case-insensitive); prints path:line: text.",
        {"pattern": {"type": "string"}, "path": {**PATH, "default": "."}}, ["pattern"]),
]
NAMES = tuple(s["function"]["name"] for s in SCHEMAS)


class Refused(Exception):
    pass


class KTools:
    def __init__(self, k: K, max_output: int = MAX_OUTPUT) -> None:
        self.root, self.max_output = Path(k.root).resolve(), max_output

    def resolve(self, path: Any) -> Path:
        if not isinstance(path, str) or not path.strip():
            raise Refused("`path` must be a non-empty string")
        if Path(path).is_absolute():
            raise Refused(f"path {path!r} must be relative to the reference root")
        resolved = (self.root / path).resolve()
        if not resolved.is_relative_to(self.root):
            raise Refused(f"path {path!r} leaves the reference")
        if not resolved.exists():
            raise Refused(f"path {path!r} not found")
        return resolved

    def call(self, name: str, arguments: dict[str, Any] | None) -> str:
        """Run one look-up; problems come back as text the model can act on, never as exceptions."""
        args = arguments or {}
        try:
            if name == "ls":
                return self.ls(args.get("path", "."))
            if name == "read":
                return self.read(args.get("path"), args.get("offset", 0))
            if name == "grep":
                return self.grep(args.get("pattern"), args.get("path", "."))
        except Refused as e:
            return f"error: {e}"
        return f"error: unknown tool `{name}`; available: {', '.join(NAMES)}, submit_review"

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() or "."

    def _files(self, base: Path) -> list[Path]:
        if base.is_file():
            return [base]
        return sorted(p for p in base.rglob("*") if p.is_file() and p.resolve().is_relative_to(self.root))

    def ls(self, path: Any = ".") -> str:
        files = self._files(self.resolve(path))
        lines = [f"{self._rel(p)}  ({p.stat().st_size} bytes)" for p in files[:MAX_LS]]
        if len(files) > MAX_LS:
            lines.append(f"... {len(files) - MAX_LS} more files")
        return "\n".join(lines) or "(no files)"

    def read(self, path: Any, offset: Any = 0) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise Refused(f"{path!r} is a folder; use ls")
        start = offset if isinstance(offset, int) and offset >= 0 else 0
        text = target.read_text(encoding="utf-8", errors="replace")
        chunk = text[start : start + self.max_output]
        end = start + len(chunk)
        if end < len(text):
            chunk += f"\n[... {len(text) - end} more characters; read again with offset={end}]"
        return chunk

    def grep(self, pattern: Any, path: Any = ".") -> str:
        if not isinstance(pattern, str) or not pattern:
            raise Refused("`pattern` must be a non-empty string")
        try:
            regex = re.compile(pattern, re.I)
        except re.error:
            regex = re.compile(re.escape(pattern), re.I)
        hits: list[str] = []
        for file in self._files(self.resolve(path)):
            for number, line in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                if regex.search(line):
                    hits.append(f"{self._rel(file)}:{number}: {line[:300]}")
                    if len(hits) >= MAX_GREP:
                        return self._cap("\n".join(hits) + f"\n[stopped after {MAX_GREP} matches]")
        return self._cap("\n".join(hits) or "(no matches)")

    def _cap(self, text: str) -> str:
        return text if len(text) <= self.max_output else text[: self.max_output] + "\n[... output capped]"
