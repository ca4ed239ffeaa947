"""Cost of the deployment harness h, as ratios against baselines measured in the same run.

1. Per-step overhead: the median time of one agent step (replay student, sandboxed `true`, trajectory
   saved) against a bare `subprocess.run(["bash", "-c", "true"])`. Target: ratio <= 2.
2. Concurrency: throughput of 16 concurrent trials against 1, with a replay student that takes 200 ms
   per response (a stand-in for a model server). Target: speed-up >= 12.

Run: `.venv/bin/python perf/harness_overhead.py [--steps N] [--trials N] [--sandbox local|none] [--json]`."""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from unscaffold.collect.models import RunConfig
from unscaffold.collect.runner import run
from unscaffold.llm.registry import load_provider
from unscaffold.llm.types import Message
from unscaffold.minimal_harness.agent import Agent, AgentConfig
from unscaffold.minimal_harness.sandbox import SandboxConfig, open_sandbox
from unscaffold.minimal_harness.tool import EXECUTE_TOOL, system_prompt
from unscaffold.minimal_harness.trajectory import Trajectory


def step_overhead(work: Path, episodes: int, kind: str, turns: int = 40) -> dict[str, float]:
    """Per-step time over whole episodes of `turns` steps, so the transcript grows as in a real trial."""
    replay = work / "steps.json"
    entries = [{"tool_call": {"name": "execute", "arguments": {"command": "true"}}}] * turns
    replay.write_text(json.dumps({"*": entries}))
    provider = load_provider(f"replay:{replay}")
    sandbox = open_sandbox(SandboxConfig(kind=kind, workspace=work / "ws"))
    sandbox.execute("true")  # start-up is a per-trial cost, not a per-step one
    samples: list[float] = []
    bare: list[float] = []
    for episode in range(episodes):
        traj = Trajectory(trial_id=f"e{episode}", task_id="perf", suite="perf", student="replay", tools=[EXECUTE_TOOL])
        traj.messages = [Message(role="system", content=system_prompt()), Message(role="user", content="perf")]
        agent = Agent(provider.for_trial("perf"), sandbox, traj, config=AgentConfig(max_turns=turns),
                      save_path=work / "trajectory.json")
        for _ in range(turns):  # baseline and harness alternate, so both see the same machine
            t = time.perf_counter()
            subprocess.run(["bash", "-c", "true"])
            bare.append(time.perf_counter() - t)
            t = time.perf_counter()
            agent.step()
            samples.append(time.perf_counter() - t)
    sandbox.close()
    bare_ms = statistics.median(bare) * 1000
    harness = statistics.median(samples) * 1000
    return {"bare_ms": round(bare_ms, 3), "step_ms": round(harness, 3), "ratio": round(harness / bare_ms, 3)}


def make_tasks(root: Path, n: int) -> Path:
    for i in range(n):
        task = root / f"t{i:02d}"
        (task / "tests").mkdir(parents=True)
        (task / "instruction.md").write_text(f"Task {i}: write ok to out.txt")
        (task / "task.toml").write_text("[verifier]\ntimeout_sec = 30\n")
        (task / "tests" / "test.sh").write_text("grep -q ok /app/out.txt && echo 1 > /logs/verifier/reward.txt\n")
    return root


def throughput(work: Path, trials: int, concurrency: int, latency: float, kind: str, executor: str = "local",
               label: str = "") -> float:
    replay = work / "student.json"
    step = {"tool_call": {"name": "execute", "arguments": {"command": "echo ok > out.txt"}}}
    if not replay.exists():  # unchanged between measurements, so a Ray node's cache of it stays valid
        replay.write_text(json.dumps({"*": [step, step, step, {"content": "done"}]}))
    tasks = work / "tasks"
    if not tasks.exists():
        make_tasks(tasks, trials)
    out = work / f"run-{re.split('[:?]', executor)[0]}-{concurrency}{label}"
    t = time.perf_counter()
    summary = run(RunConfig(suite="harbor", data=tasks, student=f"replay:{replay}?latency={latency}", out=out,
                            concurrency=concurrency, sandbox=kind, executor=executor))
    elapsed = time.perf_counter() - t
    assert summary.pass_at_1 == 100.0, summary
    return trials / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=5, help="40-step episodes timed step by step")
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--sandbox", default="local", choices=["local", "none"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="unscaffold-perf-") as tmp:
        work = Path(tmp)
        overhead = step_overhead(work, args.episodes, args.sandbox)
        one = throughput(work, args.trials, 1, args.latency, args.sandbox)
        sixteen = throughput(work, args.trials, 16, args.latency, args.sandbox)
    report = {
        "sandbox": args.sandbox,
        "step": overhead,
        "throughput": {"trials": args.trials, "latency_s": args.latency, "trials_per_s_1": round(one, 3),
                       "trials_per_s_16": round(sixteen, 3), "speedup_16": round(sixteen / one, 2)},
        "targets": {"step_ratio_max": 2.0, "speedup_16_min": 12.0},
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"per-step: h {overhead['step_ms']:.2f} ms vs bare bash {overhead['bare_ms']:.2f} ms -> "
          f"ratio {overhead['ratio']:.2f} (target <= 2)")
    t = report["throughput"]
    print(f"throughput: {t['trials_per_s_16']:.2f} trials/s at 16-way vs {t['trials_per_s_1']:.2f} at 1-way -> "
          f"speed-up {t['speedup_16']:.2f}x (target >= 12)")


if __name__ == "__main__":
    main()
