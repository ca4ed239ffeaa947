"""Cost of recording evidence: a command's time with the recorder against the same command without it,
measured in the same run.

Two local sandboxes on the same retrosynthesis task, one with the recorder attached (Python audit hook,
wrapped library calls, the LD_PRELOAD library where a C compiler built it) and one without; each command
runs in one, then the other, alternating, so both see the same machine. The recorded side's time includes
what the harness adds per command: clearing the spool before, gathering and ordering the lines after, and
appending the `evidence.jsonl` line. Printed per command: the median with and without (ms) and their ratio.

Run: `.venv/bin/python -m perf.evidence_overhead [--samples N] [--json]`."""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
from pathlib import Path

from perf.common import command_line, print_block, printed_as_json
from unscaffold.benchmarks import load_suite
from unscaffold.minimal_harness.recorder import EvidenceRecorder, append_evidence
from unscaffold.minimal_harness.sandbox import open_sandbox

COMMANDS = {
    "true": "true",
    "shell": "cat answer.txt | wc -c; ls > /dev/null; echo CCO > answer.txt",
    "python": "python -c pass",
    "rdkit": "python - <<'EOF'\nfrom rdkit import Chem\ns = open('answer.txt').read()\n"
             "print(sum(Chem.MolFromSmiles(s) is not None for _ in range(200)))\nEOF",
    "openpyxl": "python -c \"import openpyxl; wb = openpyxl.Workbook(); wb.save('o.xlsx'); "
                "openpyxl.load_workbook('o.xlsx')\"",
}


def measure(work: Path, samples: int) -> dict[str, dict[str, float]]:
    suite = load_suite("retrosynthesis")
    task = suite.tasks()[0]
    with contextlib.ExitStack() as stack:
        sandboxes = {}
        recorder = None
        for side in ("recorded", "plain"):
            config = suite.prepare(task, work / side, "local")
            if side == "recorded":
                recorder = EvidenceRecorder.attach(config)
                stack.callback(recorder.close)
            sandbox = open_sandbox(config)
            stack.callback(sandbox.close)
            sandbox.execute("echo CCO > answer.txt")
            sandboxes[side] = sandbox
        assert recorder is not None
        out: dict[str, dict[str, float]] = {}
        for name, command in COMMANDS.items():
            times: dict[str, list[float]] = {"recorded": [], "plain": []}
            for _ in range(samples):
                t = time.perf_counter()
                recorder.begin()
                result = sandboxes["recorded"].execute(command)
                append_evidence(work / "evidence.jsonl", recorder.collect(0, 2, command, result))
                times["recorded"].append(time.perf_counter() - t)
                t = time.perf_counter()
                sandboxes["plain"].execute(command)
                times["plain"].append(time.perf_counter() - t)
            recorded, plain = (statistics.median(times[s]) * 1000 for s in ("recorded", "plain"))
            out[name] = {"recorded_ms": round(recorded, 3), "plain_ms": round(plain, 3),
                         "ratio": round(recorded / plain, 3)}
        out["recorder"] = {"ldpreload": float("ldpreload" in recorder.recorder)}
    return out


def main() -> None:
    args = command_line(__doc__ or "", samples=20).parse_args()
    with tempfile.TemporaryDirectory(prefix="evidence-perf-") as work:
        figures = measure(Path(work), args.samples)
    if printed_as_json(figures, args.json):
        return
    print_block(f"evidence recorder overhead (median of {args.samples} per command, recorded / plain):",
                [f"{name:9s} {f['recorded_ms']:9.2f} ms / {f['plain_ms']:9.2f} ms = {f['ratio']:.3f}"
                 for name, f in figures.items() if name != "recorder"])


if __name__ == "__main__":
    main()
