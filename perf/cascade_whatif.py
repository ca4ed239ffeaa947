"""What the cascade reviewer would save on the demo's collection, and what it would let through.

Runs the demo's reviewed collection (shipped recorded student, the `rules` reviewer on every step, the
retrosynthesis K, the demo's train tasks), then replays the cascade's gate over its review log: the share
of reviewer calls the gate skips and the share of REPLACE decisions that fell on skipped steps.

Run: `.venv/bin/python -m perf.cascade_whatif [--out DIR] [--json]`."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from perf.common import command_line, print_block, printed_as_json
from unscaffold.demo import SUITE, DemoConfig, demo_tasks
from unscaffold.reviewer.cascade_whatif import ALL, cascade_whatif
from unscaffold.suites import find


def collect(out: Path) -> Path:
    config = DemoConfig(out=out, reviewer="rules")  # the gate is measured against the rules on every step
    train, _ = demo_tasks(config)
    bank = find(SUITE).bank
    cli = [sys.executable, "-m", "unscaffold.cli"]
    subprocess.run([*cli, "compile-k", str(bank), "--out", str(out / "K"), "--suite", SUITE], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([*cli, "run", SUITE, "--student", config.student, "--reviewer", config.reviewer, "--knowledge",
                    str(out / "K"), "--budget", str(config.budget), "--tasks", ",".join(train), "--out",
                    str(out / "collect")], check=True, stdout=subprocess.DEVNULL)
    return out / "collect"


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--out", type=Path, default=None, help="keep the collection here (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="unscaffold-cascade-") as tmp:
        run = collect(args.out or Path(tmp))
        result = cascade_whatif([run])
    total = result.cell(ALL, ALL)
    figures = {
        "trials": result.trials,
        "reviews": total.reviewed_steps,
        "reviews_skipped": total.skipped_steps,
        "saved_review_share": round(total.saved_review_share, 4),
        "reviewer_calls": total.reviewer_calls,
        "calls_saved": total.calls_saved,
        "saved_call_share": round(total.saved_call_share, 4),
        "replacements": total.replacements,
        "replacements_let_through": total.replacements_let_through,
        "missed_replacement_share": round(total.missed_replacement_share, 4),
        "per_kind": {c.kind: {"reviews": c.reviewed_steps, "replacements": c.replacements}
                     for c in result.cells if c.suite == ALL and c.kind != ALL},
    }
    if printed_as_json(figures, args.json):
        return
    print_block(f"cascade what-if on the demo's collection ({result.trials} trials, {SUITE}):", [
        f"reviews skipped:      {total.skipped_steps}/{total.reviewed_steps} = {100 * total.saved_review_share:.1f}% "
        f"(model calls saved: {total.calls_saved}/{total.reviewer_calls})",
        f"REPLACE let through:  {total.replacements_let_through}/{total.replacements} = "
        f"{100 * total.missed_replacement_share:.1f}%",
        *(f"{kind:>9}: {counts['reviews']} reviews, {counts['replacements']} REPLACE"
          for kind, counts in figures["per_kind"].items())])


if __name__ == "__main__":
    main()
