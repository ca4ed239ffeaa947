"""Read-only access to K for an LLM reviewer when K is too large to inline: ls, read, grep.

Every path is resolved inside K; anything that leaves it is refused. Outputs are capped so a
look-up never floods the reviewer's context."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from unscaffold.knowledge.kfolder import K
from unscaffold.llm.json_bounds import encodable

MAX_OUTPUT = 12_000
MAX_LS = 200
MAX_GREP = 100
MAX_PATTERN = 1_000  # characters of a grep pattern


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
    _fn("grep", "Search reference files for a regular expression (RE2 syntax: no backreferences or lookaround; "
        "case-insensitive); prints path:line: text.",
        {"pattern": {"type": "string"}, "path": {**PATH, "default": "."}}, ["pattern"]),
]
NAMES = tuple(s["function"]["name"] for s in SCHEMAS)


class Refused(Exception):
    pass


def matching_lines(lines: list[str], pattern: str) -> list[int]:
    """Indices of the lines `pattern` matches (case-insensitive), by RE2: no backtracking, so time is
    linear in the text whatever the pattern. A pattern RE2 cannot compile (a backreference, a lookaround,
    bad syntax) is refused in one line."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        matches = pc.match_substring_regex(pa.array(lines, type=pa.large_string()), pattern, ignore_case=True)
    except pa.ArrowInvalid as e:
        why = str(e).splitlines()[0].removeprefix("Invalid regular expression: ")
        raise Refused(f"`pattern` is not a regular expression RE2 accepts (no backreferences or lookaround): "
                      f"{why}") from None
    return [int(i) for i in pc.indices_nonzero(matches).to_pylist()]


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
        """Lines of K matching `pattern`, searched with RE2 (through pyarrow), whose time is linear in the
        text: a reviewer's pattern such as `^(\\w+\\s?)*$` cannot stall the run as a backtracking engine
        would (holding the interpreter lock, so no trial and no Ctrl-C gets through)."""
        if not isinstance(pattern, str) or not pattern:
            raise Refused("`pattern` must be a non-empty string")
        if len(pattern) > MAX_PATTERN:
            raise Refused(f"`pattern` is {len(pattern)} characters, over the limit of {MAX_PATTERN}")
        if not encodable(pattern):
            raise Refused("`pattern` cannot be encoded as UTF-8 (it holds a lone surrogate)")
        hits: list[str] = []
        for file in self._files(self.resolve(path)):
            lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
            for index in matching_lines(lines, pattern):
                hits.append(f"{self._rel(file)}:{index + 1}: {lines[index][:300]}")
                if len(hits) >= MAX_GREP:
                    return self._cap("\n".join(hits) + f"\n[stopped after {MAX_GREP} matches]")
        return self._cap("\n".join(hits) or "(no matches)")

    def _cap(self, text: str) -> str:
        return text if len(text) <= self.max_output else text[: self.max_output] + "\n[... output capped]"
