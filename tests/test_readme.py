"""The README and the pages under docs/ run as pasted: every command names a real command and its real flags,
every block writes its own `--out`, every link and `make` target exists, the README's recipes run offline as
written (the cheap steps always, the training and tiny-model steps in the slow test), and (slow) every command
of every page that needs no real model, server or cluster runs, in order, from a fresh folder."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from tests.helpers import needs_bwrap
from unscaffold.cli import app

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
GENERATED = {"cli.md"}  # the command reference is checked against the commands by tests/test_cli_docs.py

# What a reader replaces before a command can run here, so the command is only checked, never run: a real
# model or server (network), a GPU or a cluster, their own data, a value of their own.
NEEDS_MORE_THAN_THIS_MACHINE = ("...", "path/to", "BASE", "openai:", "anthropic:", "hf:Qwen", "hf:path", "ray:",
                                "HEAD", "$", "~/")
# Steps that train or generate with the tiny model on the CPU: minutes each, so they run in the slow test only.
SLOW_STEPS = ("train-sft", "rescue train", "hf:", "reproduce")
EXPECTED_STATUS = {"'sleep 60'": 1}  # the time-out example: the command is killed, so the observation exits 1


def pages() -> list[Path]:
    """The README, then the docs pages in the order their index lists them."""
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    listed = [DOCS / name for name in re.findall(r"\]\(([\w.-]+\.md)\)", index) if name not in GENERATED]
    return [README, DOCS / "README.md", *dict.fromkeys(listed)]


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)


def commands(text: str) -> list[str]:
    """Every `unscaffold` command of the bash blocks, continuation lines joined, in order."""
    found = []
    for block in bash_blocks(text):
        pending = ""
        for line in block.replace("\\\n", " ").splitlines():
            pending = f"{pending}\n{line}" if pending else line
            try:  # a quoted argument may span lines
                words = shlex.split(pending, comments=True)
            except ValueError:
                continue
            if any(is_unscaffold(w) for w in words):
                found.append(pending.strip())
            pending = ""
    return found


def is_unscaffold(word: str) -> bool:
    return word.endswith("bin/unscaffold") or word in ("unscaffold", "unscaffold.cli")


def argv(command: str) -> list[str]:
    """The arguments after `unscaffold` (or `-m unscaffold.cli`)."""
    words = shlex.split(command, comments=True)
    start = next(i for i, w in enumerate(words) if is_unscaffold(w))
    return words[start + 1:]


def offline(command: str) -> bool:
    return command.startswith(".venv/bin/unscaffold ") and not any(p in command for p in NEEDS_MORE_THAN_THIS_MACHINE)


def runnable(found: list[str], skip: tuple[str, ...] = ()) -> list[str]:
    """The offline commands, less those naming `skip`, that read nothing a command left out writes (its `--out`)."""
    unmade: set[str] = set()
    chosen = []
    for command in found:
        args = argv(command)
        if offline(command) and not any(s in command for s in skip) and not unmade & set(args):
            chosen.append(command)
        elif "--out" in args:
            unmade.add(args[args.index("--out") + 1])
    return chosen


def resolve(args: list[str]) -> Any:
    """The (sub-)command the arguments name."""
    command: Any = get_command(app)
    for word in args:
        if not hasattr(command, "commands") or word.startswith("-"):
            break
        if word not in command.commands:
            break
        command = command.commands[word]
    return command


def flags(command: Any) -> set[str]:
    return {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


PAGES = pages()
README_COMMANDS = commands(README.read_text(encoding="utf-8"))
ALL_COMMANDS = [(page, c) for page in PAGES for c in commands(page.read_text(encoding="utf-8"))]


def test_the_pages_are_read_as_commands() -> None:
    assert [p.name for p in PAGES[:3]] == ["README.md", "README.md", "install.md"]
    assert len(README_COMMANDS) >= 20 and runnable(README_COMMANDS) == README_COMMANDS  # both recipes offline
    assert len(ALL_COMMANDS) >= 60 and len(runnable([c for _, c in ALL_COMMANDS])) >= 40
    assert runnable([".venv/bin/unscaffold run s --student hf:BASE --out runs/a",
                     ".venv/bin/unscaffold compare runs/a runs/b --out c.html",
                     ".venv/bin/unscaffold rescue simulate --out runs/sim"]) == [
        ".venv/bin/unscaffold rescue simulate --out runs/sim"]
    assert argv(".venv/bin/unscaffold rescue route appworld_lite --student oracle  # routed") == [
        "rescue", "route", "appworld_lite", "--student", "oracle"]


@pytest.mark.parametrize("command", [c for _, c in ALL_COMMANDS],
                         ids=[f"{p.name}:{i}" for i, (p, _) in enumerate(ALL_COMMANDS)])
def test_every_flag_exists_where_it_is_used(command: str) -> None:
    args = argv(command)
    target = resolve(args)
    assert not hasattr(target, "commands"), f"{command}: names no command"
    used = {a.split("=", 1)[0] for a in args if a.startswith("--") and a != "--"}
    if "--" in args:  # `exec -- COMMAND`: what follows is the command's own
        used = {a.split("=", 1)[0] for a in args[:args.index("--")] if a.startswith("--")}
    assert used <= flags(target), f"{command}: unknown {sorted(used - flags(target))}"


def test_every_command_writes_its_own_out() -> None:
    outs: Counter[str] = Counter()
    for _, command in ALL_COMMANDS:
        args = argv(command)
        if "--out" in args and "..." not in args:
            outs[args[args.index("--out") + 1]] += 1
    assert [out for out, n in outs.items() if n > 1] == []


def test_every_link_and_make_target_exists() -> None:
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(encoding="utf-8"), flags=re.M))
    broken = []
    for page in [*PAGES, DOCS / "cli.md"]:
        text = page.read_text(encoding="utf-8")
        for block in bash_blocks(text):
            broken += [f"{page.name}: make {t}" for t in re.findall(r"^make ([\w-]+)", block, flags=re.M)
                       if t not in targets]
        for link in re.findall(r"\]\(([^)\s]+)\)", text):
            if link.startswith(("http://", "https://")):
                continue
            path, _, anchor = link.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.name}: {link}")
            elif anchor and file.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", file.read_text(encoding="utf-8"), flags=re.M)
                if anchor not in {slug(h) for h in headings}:
                    broken.append(f"{page.name}: {link}")
    assert broken == []
    assert slug("`unscaffold rescue train`") == "unscaffold-rescue-train"
    assert slug("Harness-S: sibling rescue RL") == "harness-s-sibling-rescue-rl"


def test_every_command_says_what_it_is_for_and_names_its_sub_commands() -> None:
    def walk(group: Any, path: list[str]) -> None:
        shown = CliRunner().invoke(app, [*path, "--help"], terminal_width=200).output
        assert "The `unscaffold` command." not in shown
        for name, command in group.commands.items():
            assert re.search(rf"│ {re.escape(name)} ", shown), f"{' '.join(path)} --help does not name {name}"
            assert (command.help or "").strip(), f"{' '.join([*path, name])} says nothing"
            if hasattr(command, "commands"):
                missing = [n for n in command.commands if n not in (command.help or "")]
                assert not missing, f"{' '.join([*path, name])} --help: its sentence leaves out {missing}"
                walk(command, [*path, name])

    root = get_command(app)
    assert hasattr(root, "commands") and root.help and "distil" in root.help
    walk(root, [])


def run_in_fresh_checkout(found: list[str], folder: Path) -> None:
    """Each command in order, as a user pastes it into a checkout (the code, examples and .venv linked in)."""
    for name in ("examples", ".venv", "unscaffold", "splits"):
        (folder / name).symlink_to(ROOT / name)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for command in found:
        done = subprocess.run(["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True)
        expected = next((code for key, code in EXPECTED_STATUS.items() if key in command), 0)
        assert done.returncode == expected, f"{command}\n{done.stderr[-2000:]}"


@needs_bwrap
def test_the_readme_recipes_cheap_steps_run_as_pasted(tmp_path: Path) -> None:
    """Compiling K, the recorded students and reviewer, build-sft, the simulator, the pool and the validation
    table: the steps that take seconds (those that train or generate with the tiny model are the slow test's)."""
    cheap = runnable(README_COMMANDS, skip=SLOW_STEPS)
    assert len(cheap) >= 10
    run_in_fresh_checkout(cheap, tmp_path)
    assert (tmp_path / "runs" / "hz" / "sft.jsonl").read_text(encoding="utf-8").strip()
    assert (tmp_path / "runs" / "hs" / "validation.json").is_file()


@pytest.mark.slow
@pytest.mark.timeout(7200)
@needs_bwrap
def test_every_page_runs_as_pasted(tmp_path: Path) -> None:
    """Every offline command of the README and of each page, in order, in one fresh folder."""
    run_in_fresh_checkout(runnable([c for _, c in ALL_COMMANDS]), tmp_path)
