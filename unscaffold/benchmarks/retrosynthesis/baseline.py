"""Numbers for the closing note: the template tool alone as a baseline, and scoring throughput.

The template library is the bank's own tool script (rendered from bank_src/, its templates the table
bank_src/retro_templates.tsv); it is imported here by path, so the baseline measures what the student runs.

    python -m unscaffold.benchmarks.retrosynthesis.baseline [--split test] [--data FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import tempfile
import time
from pathlib import Path
from types import ModuleType

from .suite import ANSWER, RetrosynthesisSuite

TOOL = Path(__file__).resolve().parent / "hstar" / "tools" / "retro_templates.py"


def load_template_library(path: Path = TOOL) -> ModuleType:
    """The retro-template tool script as a module (its main() only runs as a script)."""
    spec = importlib.util.spec_from_file_location("retro_templates", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the template library from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def template_baseline(suite: RetrosynthesisSuite, split: str | None = "test", *, use_type: bool = True,
                      ks: tuple[int, ...] = (1, 5, 10)) -> dict[str, float]:
    """Top-k exact-match accuracy (percent) of the template ranking alone, no model: the floor a student with
    the tool should beat. `use_type` passes the reaction class, as the task instruction gives it."""
    library = load_template_library()
    if suite.split_file is not None:  # the file's split, not the one the CSV's name says
        listed = {t.id for t in suite.tasks(split)}
        reactions = [r for r in suite.reactions if r.id in listed]
    else:
        reactions = [r for r in suite.reactions if split is None or r.split == split]
    hits = dict.fromkeys(ks, 0)
    for r in reactions:
        candidates = library.enumerate_precursors(r.gold.product, r.rclass if use_type else None, max(ks))
        sets = [tuple(sorted(c["reactants"].split("."))) for c in candidates]
        rank = sets.index(r.gold.reactants) + 1 if r.gold.reactants in sets else None
        for k in ks:
            hits[k] += rank is not None and rank <= k
    n = len(reactions)
    return {"n": float(n), **{f"top_{k}": round(100.0 * hits[k] / n, 2) if n else 0.0 for k in ks}}


def scoring_throughput(suite: RetrosynthesisSuite, split: str | None = None, rounds: int = 5) -> float:
    """Reactions scored per second through `suite.score` (answer file read from disk, RDKit in-process),
    alternating right and wrong answers; references are canonicalised before the clock starts."""
    tasks = suite.tasks(split)
    tmp = Path(tempfile.mkdtemp(prefix="unscaffold-retro-score-"))
    try:
        for i, task in enumerate(tasks):
            workspace = tmp / task.id / "workspace"
            workspace.mkdir(parents=True)
            answer = suite.reaction(task).recorded_answer()
            (workspace / ANSWER).write_text(answer if i % 2 == 0 else answer.split(".")[0] + "\n")
        start = time.perf_counter()
        for _ in range(rounds):
            for task in tasks:
                suite.score(task, tmp / task.id, None, None)  # type: ignore[arg-type]  # neither is read
        return len(tasks) * rounds / (time.perf_counter() - start)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="test")
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--split-file", type=Path, default=None)
    args = parser.parse_args(argv)
    suite = RetrosynthesisSuite(args.data)
    if args.split_file is not None:
        suite.use_split_file(args.split_file)
    report = {
        "split": args.split,
        "template_baseline_with_type": template_baseline(suite, args.split),
        "template_baseline_without_type": template_baseline(suite, args.split, use_type=False),
        "scoring_reactions_per_second": round(scoring_throughput(suite), 1),
        **suite.describe(),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
