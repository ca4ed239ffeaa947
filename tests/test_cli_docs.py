"""docs/cli.md is what the command tree says today: a fresh render, written to a temporary folder, equals the
committed page (the page is never rewritten by the test, so a stale page fails until regenerated)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_cli_docs", ROOT / "scripts" / "gen_cli_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_command_reference_is_in_step_with_the_commands(tmp_path: Path) -> None:
    gen = generator()
    gen.main(tmp_path / "cli.md")
    fresh = (tmp_path / "cli.md").read_text(encoding="utf-8")
    committed = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert fresh == committed, f"docs/cli.md is stale: run `{gen.COMMAND}` and commit docs/cli.md"


def test_the_reference_says_it_is_generated_and_names_every_command_and_option() -> None:
    gen = generator()
    page = gen.render()
    assert page.splitlines()[0] == gen.HEADER and gen.COMMAND in gen.HEADER
    assert "## `unscaffold run`" in page and "### `unscaffold rescue train`" in page
    assert "- `--trials <int>` (default `1`): Trials per task." in page
    assert "- `suite <str>` (required): Suite name:" in page
    assert "- `--max-turns <int>` (default `40`): Student turns per trial. (at least 1.)" in page


def test_click_notes_are_split_from_help_but_hand_written_brackets_stay() -> None:
    gen = generator()
    assert gen.CLICK_NOTE.match("default: 3") and gen.CLICK_NOTE.match("x>=1") and gen.CLICK_NOTE.match("0<=x")
    assert not gen.CLICK_NOTE.match("32")
