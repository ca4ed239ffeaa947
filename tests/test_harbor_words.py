"""examples/harbor_words, the toy family the real model is distilled on, and its h* bank: the folders are what
the script writes, every task passes with its solution, and the rules reviewer turns a finish without a write
into the bank's write_line recipe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import EXAMPLES, ROOT, assert_k_current, final, needs_bwrap
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run

WORDS = EXAMPLES / "harbor_words"
BANK = EXAMPLES / "hstar" / "words_bank"
SHIPPED_K = EXAMPLES / "hstar" / "words_k"
SPLIT = WORDS / "split.json"


def test_the_shipped_tasks_are_what_the_script_writes(tmp_path: Path) -> None:
    out = tmp_path / "words"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_words_tasks.py"), str(out)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == f"16 tasks in {out} (train 10, test 6)\n"
    files = sorted(p.relative_to(WORDS) for p in WORDS.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    for relative in files:
        assert (WORDS / relative).read_bytes() == (out / relative).read_bytes(), relative
        assert (WORDS / relative).stat().st_mode == (out / relative).stat().st_mode, relative
    split = json.loads(SPLIT.read_text())
    assert (len(split["train"]), len(split["test"]), split["validation"]) == (10, 6, [])
    assert (WORDS / "word-fish" / "instruction.md").read_text() == (
        "Create a file `/app/fish.txt` whose only line is `salmon`.\n")


def test_the_shipped_k_is_the_compiled_bank(tmp_path: Path) -> None:
    assert_k_current(BANK, SHIPPED_K, tmp_path)


@needs_bwrap
def test_every_task_passes_with_its_solution(tmp_path: Path) -> None:
    summary = run(RunConfig(suite="harbor", data=WORDS, split_file=SPLIT, student="oracle", out=tmp_path,
                            concurrency=2))
    assert summary.n_tasks == 16 and summary.pass_at_1 == 100.0


@needs_bwrap
def test_the_rules_reviewer_replaces_a_finish_without_a_write(tmp_path: Path, write_replay) -> None:
    student = write_replay({"*": [final("I created the file."), final("The file is written.")]})
    summary = run(RunConfig(suite="harbor", data=WORDS, split_file=SPLIT, split="train", student=student,
                            reviewer="rules", knowledge=SHIPPED_K, budget=5, task_ids=["word-city", "word-fruit"],
                            out=tmp_path))
    assert summary.per_task == {"word-city": 1.0, "word-fruit": 1.0}
    assert summary.replacements_per_trial == {"word-city": 1, "word-fruit": 1}
    messages = json.loads((tmp_path / "trials" / "word-city" / "trajectory.json").read_text())["messages"]
    command = messages[2]["tool_calls"][0]["function"]["arguments"]["command"]
    assert command.startswith("python3 - '{\"path\": \"/app/city.txt\", \"text\": \"Lisbon\"}' <<'UNSCAFFOLD_RECIPE'")
    assert [m["role"] for m in messages[2:]] == ["assistant", "tool", "assistant"]
    assert messages[3]["content"] == "\n[exit_code=0]" and messages[4]["content"] == "The file is written."


@needs_bwrap
def test_the_recorded_reviewer_writes_and_closes_so_build_sft_keeps_the_rows(tmp_path: Path, write_replay) -> None:
    """The untrained model's own closing text is chat markup (`<tool_response>` repeated), which build-sft must
    drop; the recorded reviewer replaces it with a plain answer, so the row is kept."""
    from typer.testing import CliRunner

    from unscaffold.cli import app

    student = write_replay({"*": [final("I created the file."), final("<tool_response>\n\n<tool_response>")]})
    summary = run(RunConfig(suite="harbor", data=WORDS, split_file=SPLIT, split="train", student=student,
                            reviewer=f"replay:{WORDS / 'reviewer.json'}", knowledge=SHIPPED_K, budget=5,
                            task_ids=["word-city"], out=tmp_path / "run"))
    assert summary.per_task == {"word-city": 1.0} and summary.replacements == 2
    done = CliRunner().invoke(app, ["build-sft", str(tmp_path / "run"), "--out", str(tmp_path / "sft.jsonl")])
    assert done.exit_code == 0, done.output
    (row,) = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert [m["role"] for m in row["messages"][2:]] == ["assistant", "tool", "assistant"]
    assert row["messages"][-1]["content"] == "The file `/app/city.txt` now holds the line `Lisbon`."
