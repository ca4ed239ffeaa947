"""`build-sft` throughput against a plain read-and-write of the same files, measured in the same run.

Writes N synthetic reviewed trials of 40 turns (some replaced turns with reviewer-voice reasoning, a few
low-reward trials, `pip install` commands; with `--knowledge shipped` collected with the shipped
spreadsheet K, whose paths, ids and check names, `stall` among them, are then the markers), then times
(a) reading every trial's files and writing them out unchanged, and (b) `build_sft` over the same run,
with its default workers (one process per core, the calling one included) and in one process, alternating
(a) and (b) for `--rounds`.
Each figure is wall time and CPU time (process plus waited-for children: the machine may be shared, and
CPU time is what other load disturbs least). Targets: (b)/(a) <= 2 with the workers, <= 3 in one process.

Run: `.venv/bin/python -m perf.build_sft_throughput [--trials 10000] [--turns 40] [--knowledge K|shipped|none]
[--rounds 3] [--json]`."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from perf.common import command_line, printed_as_json
from unscaffold.minimal_harness.tool import EXECUTE_TOOL, system_prompt
from unscaffold.run.folder import RunFolder
from unscaffold.sft.build import build_sft
from unscaffold.suites import find

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_K = find("spreadsheet").k


def synthetic_trial(i: int, turns: int) -> tuple[dict, dict, list[dict]]:
    messages = [{"role": "system", "content": system_prompt()}, {"role": "user", "content": f"Task {i}: do it."}]
    steps, reviews = [], []
    for t in range(1, turns):
        index = len(messages)
        command = f"python3 -c 'print({i} * {t})' && ls -la data/part_{t}.csv"
        if t % 7 == 0:  # a near-miss for the whole-token scrub: `stall` is a check name of the shipped K
            command = f"pip install openpyxl && {command}"
        replaced = t % 10 == 3
        reasoning = ("The student's proposal skipped the check, so I rewrite it." if replaced and i % 2
                     else f"Step {t}: inspect the next part of the data before writing the result.")
        function = {"name": "execute", "arguments": {"command": command}}
        call = {"id": f"call_{t}", "type": "function", "function": function}
        messages.append({"role": "assistant", "content": "", "reasoning_content": reasoning, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{t}", "name": "execute",
                         "content": f"{i * t}\n-rw-r--r-- 1 root root {t * 100} data/part_{t}.csv\n" * 3
                         + "[exit_code=0]"})
        steps.append({"turn": t, "message_index": index, "started_at": "2026-01-01T00:00:00", "replaced": replaced,
                      "command": command, "exit_code": 0})
        proposal = {"tool_calls": [{"id": f"call_{t}", "name": "execute", "arguments": {"command": command}}]}
        if replaced:
            reviews.append({"turn": t, "decision": "REPLACE", "reason": "fix", "proposal": {"content": "draft"},
                            "replacement": {"reasoning": reasoning, "tool_call": {"name": "execute",
                                                                                  "arguments": {"command": command}}}})
        else:
            proposal["reasoning"] = reasoning
            reviews.append({"turn": t, "decision": "PASS", "reason": "ok", "proposal": proposal})
    messages.append({"role": "assistant", "content": f"Done with task {i}."})
    steps.append({"turn": turns, "message_index": len(messages) - 1, "started_at": "2026-01-01T00:00:00"})
    reviews.append({"turn": turns, "decision": "PASS", "reason": "ok", "proposal": {"content": f"Done with task {i}."}})
    traj = {"trial_id": f"t{i:05d}", "task_id": f"task{i % 500}", "suite": "perf", "student": "replay",
            "harness": "minimal", "tools": [EXECUTE_TOOL], "messages": messages, "steps": steps,
            "exit_status": "submitted", "final_answer": f"Done with task {i}."}
    result = {"trial_id": traj["trial_id"], "task_id": traj["task_id"], "reward": 0.0 if i % 20 == 0 else 1.0,
              "exit_status": "submitted"}
    return traj, result, reviews


def write_run(root: Path, trials: int, turns: int, knowledge: Path | None = None) -> Path:
    run = RunFolder(root / "run")
    if knowledge is not None:
        run.write_knowledge(knowledge)
    for i in range(trials):
        trial = run.trial(f"t{i:05d}")
        trial.root.mkdir(parents=True)
        traj, result, reviews = synthetic_trial(i, turns)
        trial.trajectory.write_text(json.dumps(traj, indent=2))
        trial.result.write_text(json.dumps(result, indent=2))
        trial.reviews.write_text("".join(json.dumps(r) + "\n" for r in reviews))
    return run.root


def cpu_s() -> float:
    """CPU seconds of this process and of every child it has waited for (their own waited children too)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall s, CPU s) of one call."""
    wall, cpu = time.perf_counter(), cpu_s()
    fn()
    return time.perf_counter() - wall, cpu_s() - cpu


def plain_copy(run: Path, out: Path) -> None:
    with open(out, "w", encoding="utf-8") as sink:
        for trial in RunFolder(run).trials():
            for path in (trial.result, trial.trajectory, trial.reviews):
                sink.write(path.read_text(encoding="utf-8"))


# build-sft with its default workers, in a process of its own: when it ends, its workers (and a fork server,
# where one was used) have been waited for, so their CPU (start-up included) is in this process's children's usage.
POOLED = """
import json, resource, sys, time
from pathlib import Path
from unscaffold.sft.build import build_sft
def cpu():
    own, ch = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + ch.ru_utime + ch.ru_stime
wall, c = time.perf_counter(), cpu()
report = build_sft([Path(sys.argv[1])], Path(sys.argv[2]))
wall = time.perf_counter() - wall
import multiprocessing.forkserver as fs
getattr(fs._forkserver, "_stop", lambda: None)()  # wait for the server (which waited for its workers)
print(json.dumps({"wall": wall, "cpu": cpu() - c, "kept": report.kept, "dropped": report.dropped}))
"""


def pooled(run: Path, out: Path) -> dict:
    """(wall, CPU of the build in that process, its server and workers), measured inside the child so the
    interpreter's start and imports are not counted."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", POOLED, str(run), str(out)], capture_output=True, text=True,
                          env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = command_line(__doc__, trials=10_000, turns=40)
    parser.add_argument("--rounds", type=int, default=3, help="baseline and builds alternate this many times; "
                        "each figure is the best of its rounds")
    parser.add_argument("--knowledge", default="none",
                        help="K the run records: a K folder, 'shipped' (the spreadsheet K) or 'none'")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="unscaffold-perf-sft-"))
    best: dict[str, list[float]] = {}

    def keep(name: str, wall: float, cpu: float) -> None:
        old = best.get(name, [float("inf"), float("inf")])
        best[name] = [min(old[0], wall), min(old[1], cpu)]

    try:
        t = time.perf_counter()
        knowledge = {"none": None, "shipped": SHIPPED_K}.get(args.knowledge, Path(args.knowledge))
        run = write_run(root, args.trials, args.turns, knowledge)
        generate = time.perf_counter() - t
        plain_copy(run, root / "warm.txt")  # every measurement reads from a warm page cache
        reports: list = []
        for _ in range(args.rounds):  # alternated, so a burst of load elsewhere hits every figure alike
            keep("plain", *timed(lambda: plain_copy(run, root / "copy.txt")))
            pool = pooled(run, root / "data.jsonl")
            keep("pool", pool["wall"], pool["cpu"])
            keep("plain", *timed(lambda: plain_copy(run, root / "copy.txt")))
            keep("single", *timed(lambda: reports.append(build_sft([run], root / "data1.jsonl", workers=1))))
        size = sum(p.stat().st_size for p in RunFolder(run).trials_dir.rglob("*") if p.is_file())
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report = reports[-1]
    (base_wall, base_cpu), (build, build_cpu), (single, single_cpu) = best["plain"], best["pool"], best["single"]
    out = {"trials": args.trials, "turns": args.turns, "input_mb": round(size / 1e6, 1), "rounds": args.rounds,
           "generate_s": round(generate, 2), "plain_read_write_s": round(base_wall, 3),
           "plain_read_write_cpu_s": round(base_cpu, 3), "build_sft_s": round(build, 3),
           "build_sft_cpu_s": round(build_cpu, 3), "single_process_s": round(single, 3),
           "single_process_cpu_s": round(single_cpu, 3),
           "ratio": round(build / base_wall, 2), "cpu_ratio": round(build_cpu / base_cpu, 2),
           "single_process_ratio": round(single / base_wall, 2),
           "single_process_cpu_ratio": round(single_cpu / base_cpu, 2),
           "workers": len(os.sched_getaffinity(0)), "kept": report.kept, "dropped": report.dropped,
           "trials_per_s": round(args.trials / build, 1), "target_ratio_max": 2.0,
           "target_single_process_ratio_max": 3.0}
    if not printed_as_json(out, args.json):
        print(f"build-sft: {args.trials} trials x {args.turns} turns ({out['input_mb']} MB), best of {args.rounds} "
              f"alternated rounds; plain read+write {base_wall:.2f} s wall, {base_cpu:.2f} s CPU\n"
              f"  {out['workers']} workers: {build:.2f} s wall ({out['trials_per_s']} trials/s), {build_cpu:.2f} s "
              f"CPU -> wall ratio {out['ratio']:.2f} (target <= 2), CPU ratio {out['cpu_ratio']:.2f}\n"
              f"  one process: {single:.2f} s wall, {single_cpu:.2f} s CPU -> wall ratio "
              f"{out['single_process_ratio']:.2f} (target <= 3), CPU ratio {out['single_process_cpu_ratio']:.2f}\n"
              f"  kept {report.kept}, dropped {report.dropped}")


if __name__ == "__main__":
    main()
