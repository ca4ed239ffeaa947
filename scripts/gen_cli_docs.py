"""Writes docs/cli.md, the reference of every `unscaffold` command, from the command itself: each command's
sentence, usage, arguments and options with their defaults and help, as `--help` gives them. Run it after
changing a command or an option (a test fails while the committed page differs from a fresh one):

    .venv/bin/python scripts/gen_cli_docs.py [OUT_FILE]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from typer.main import get_command

from unscaffold.cli import app

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "cli.md"
COMMAND = ".venv/bin/python scripts/gen_cli_docs.py"
HEADER = (f"<!-- Generated from the `unscaffold` command by `{COMMAND}`: do not edit by hand, "
          "change the command's options and run it again. -->")
# What click appends to an option's help: pulled out so the default has a place of its own.
CLICK_NOTE = re.compile(r"default: |required$|env var: |[\w.]*x[<>]=?|[\w.]+<=?x")
SUFFIX = re.compile(r"\s*\[(?P<items>(?:[^\[\]]|\[[^\]]*\])*)\]\s*$")


def _one_line(text: str) -> str:
    return " ".join(text.replace("\b", "").split())


def _option(param: Any, ctx: Any) -> str | None:
    record = param.get_help_record(ctx)
    if record is None or getattr(param, "hidden", False):
        return None
    name, help_text = record
    notes: list[str] = []
    found = SUFFIX.search(help_text)
    items = [n.strip() for n in re.split(r";\s+", found["items"])] if found else []
    if items and all(CLICK_NOTE.match(n) for n in items):
        help_text, notes = help_text[:found.start()], items
    shown = [n if n == "required" else f"{n.split(': ', 1)[0]} `{n.split(': ', 1)[1]}`" if ": " in n else f"`{n}`"
             for n in notes]
    after = f" ({'; '.join(shown)})" if shown else ""
    return f"- `{name}`{after}: {_one_line(help_text) or '(no help)'}"


def _command(command: Any, path: list[str], parent: Any) -> list[str]:
    ctx = type(parent)(command, info_name=path[-1], parent=parent)
    title = " ".join(path)
    lines = [f"{'#' * min(len(path), 4)} `{title}`", "", _one_line(command.help or ""), ""]
    pieces = " ".join(command.collect_usage_pieces(ctx))
    lines += [f"Usage: `{title} {pieces}`", ""]
    if hasattr(command, "commands"):
        subs = [n for n, c in command.commands.items() if not c.hidden]
        lines += ["Commands: " + ", ".join(f"`{title} {n}`" for n in subs), ""]
    options = [o for p in command.params if (o := _option(p, ctx))]
    lines += [*options, ""] if options else []
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            if not sub.hidden:
                lines += _command(sub, [*path, name], ctx)
    return lines


def render() -> str:
    """The page, from the live command tree."""
    root = get_command(app)
    ctx_type = type(root.make_context("unscaffold", [], resilient_parsing=True))
    top = ctx_type(root, info_name="unscaffold")
    lines = [HEADER, "", "# Command reference", "",
             "Every command and option of `unscaffold`, as its `--help` gives them. Topics: [docs/](README.md).", ""]
    lines += ["## `unscaffold`", "", _one_line(root.help or ""), "",
              f"Usage: `unscaffold {' '.join(root.collect_usage_pieces(top))}`", "",
              *(o for p in root.params if (o := _option(p, top))), ""]
    for name, command in root.commands.items():
        if not command.hidden:
            lines += _command(command, ["unscaffold", name], top)
    return "\n".join(lines).rstrip() + "\n"


def main(out: Path = OUT) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(), encoding="utf-8")
    print(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
