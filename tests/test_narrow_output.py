"""Output that reads at 80 columns and in a log: tables too wide for the terminal fold to one block per row,
sentences wrap without leaving a word alone on a line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.test_behaviors import harbor_runs
from unscaffold.behaviors.terminal import folded, wrap
from unscaffold.cli import app


def lone_words(output: str) -> list[str]:
    """Lines holding a single word (table borders and blank lines are no words)."""
    return [line for line in output.splitlines() if len(line.split()) == 1 and re.search(r"\w", line)]


def test_wrap_keeps_lines_in_width_and_leaves_no_word_alone() -> None:
    assert wrap("one two three four five", 14) == ["one two three", "four five"]
    assert wrap("one two three four", 13, "  ") == ["one two", "  three four"]
    assert wrap("short", 80) == ["short"]


def test_a_wide_table_folds_to_one_block_per_row() -> None:
    grid = (["behaviour", "component", "eligible", "recovered", "rate"],
            [["keep prefilled cells", "check:prefilled", "26", "24", "92.3%"], ["read pages", "skill:paging", "53",
                                                                                 "21", ""]])
    assert folded("behaviour recovery: runs/t", grid, 44) == [
        "behaviour recovery: runs/t (2 rows, one",
        "block each)",
        "- behaviour: keep prefilled cells",
        "    component: check:prefilled; eligible: 26",
        "    recovered: 24; rate: 92.3%",
        "- behaviour: read pages",
        "    component: skill:paging; eligible: 53",
        "    recovered: 21; rate: -",
    ]


@pytest.mark.parametrize("columns", ["80", "40"])
def test_behaviors_at_narrow_widths_has_no_line_a_lone_word(tmp_path: Path, columns: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # run folders named as a user names them (a path longer than a line stays whole)
    runs = harbor_runs(Path("runs"))
    result = CliRunner().invoke(app, ["behaviors", "--base-h", str(runs["base_h"]), "--base-hstar",
                                      str(runs["base_hstar"]), "--tuned", str(runs["tuned"]), "--min-eligible", "2"],
                                env={"COLUMNS": columns})
    assert result.exit_code == 0, result.output
    assert lone_words(result.output) == []
    assert all(len(line) <= int(columns) for line in result.output.splitlines())
    assert "66.7%" in result.output
    if columns == "40":
        assert "- behaviour: " in result.output  # folded


def test_version() -> None:
    from unscaffold import __version__

    result = CliRunner().invoke(app, ["--version"])
    assert (result.exit_code, result.output) == (0, f"unscaffold {__version__}\n")


def test_progress_lines_for_a_log() -> None:
    import io

    from unscaffold.progress_lines import ProgressLines

    stream = io.StringIO()
    lines = ProgressLines("train-sft step", every_s=3600, stream=stream)
    for step in range(1, 6):
        lines.update(step, f"loss {1 / step:.2f}", total=5)
    assert [line.split(" (")[0] for line in stream.getvalue().splitlines()] == ["train-sft step 1/5",
                                                                                "train-sft step 5/5"]
    assert stream.getvalue().splitlines()[-1].endswith(") loss 0.20")
