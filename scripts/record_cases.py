"""Runs every detector case that names a `task` for real and keeps what happened: each case's commands go,
in order, to a fresh trial of that task (`unscaffold run` with a replay student, the local sandbox, evidence
recorded), and its observations, exit statuses and `evidence.jsonl` are written to the bank's
`detector_cases.recorded.jsonl`. Run it after adding or changing such a case:

    .venv/bin/python scripts/record_cases.py SUITE BANK_DIR [--split test]

The recorded evidence is renumbered to the case's own trajectory (one user message, then the commands), which
is how `CaseFile.trajectory` rebuilds it; everything else is as recorded.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from unscaffold.behaviors.cases import RECORDINGS_FILE, RecordedCase, RecordedStep, load_cases
from unscaffold.iojson import write_text_atomic
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.run.folder import RunFolder


def record(suite: str, bank: Path, split: str) -> list[RecordedCase]:
    cases = load_cases(bank)
    out = []
    for case in (c for c in cases.cases if c.task is not None):
        commands = cases.commands(case)
        if not all(isinstance(c, str) for c in commands):
            raise SystemExit(f"{case.key}: a recorded case runs commands only (no h* tool calls)")
        assert case.task is not None
        with tempfile.TemporaryDirectory(prefix="unscaffold-case-") as tmp:
            replay = Path(tmp) / "replay.json"
            replay.write_text(json.dumps({case.task: [
                *({"tool_call": {"name": "execute", "arguments": {"command": c}}} for c in commands),
                {"content": case.final or "Done."}]}))
            run = Path(tmp) / "run"
            done = subprocess.run([sys.executable, "-m", "unscaffold.cli", "run", suite, "--split", split, "--student",
                                   f"replay:{replay}", "--tasks", case.task, "--out", str(run)],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"{case.key}: the run failed: {done.stderr.strip()[-400:]}")
            trial = RunFolder(run).trials()[0]
            traj = Trajectory.load(trial.trajectory)
            evidence = trial.read_evidence() or []
        seen = traj.messages[traj.opening_messages:]
        observations = [m.content for m in seen if m.role == "tool"]
        if len(observations) != len(commands) or len(evidence) != len(commands):
            raise SystemExit(f"{case.key}: {len(commands)} commands, {len(observations)} observations, "
                             f"{len(evidence)} evidence lines")
        steps = []
        for k, (command, observation, line) in enumerate(zip(commands, observations, evidence, strict=True)):
            assert isinstance(command, str)
            status = re.search(r"\[exit_code=(-?\d+)\]\s*$", observation)
            steps.append(RecordedStep(command=command, observation=observation,
                                      exit_code=int(status.group(1)) if status else line.exit_code))
            line.step, line.message_index = k, 1 + 2 * k
        out.append(RecordedCase(key=case.key, task=case.task, steps=steps, evidence=evidence))
        print(f"recorded {case.key}", file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite")
    parser.add_argument("bank", type=Path)
    parser.add_argument("--split", default="test")
    args = parser.parse_args()
    recorded = record(args.suite, args.bank, args.split)
    write_text_atomic(args.bank / RECORDINGS_FILE, "".join(r.model_dump_json() + "\n" for r in recorded))


if __name__ == "__main__":
    main()
