"""Cost of the deployment harness h, as ratios against baselines measured in the same run.

1. Per-step overhead: the median time of one agent step (replay student, sandboxed `true`, trajectory
   saved) against a bare `subprocess.run(["bash", "-c", "true"])`, the two alternating. Target: <= 1.2.
   Then where a step's time goes beyond the bash process (each part timed alone, medians in ms): the
   sandbox's round trip and the command inside it, the cgroup sweep, the trajectory save, the workspace
   watchdog (over 2,000 files) and the observation, and how often the trajectory is written; and CPU per
   command (getrusage of this process and its children, plus the sandbox's own cgroup where the host
   keeps one) against bare bash's (bash and this process starting and reaping it). On a shared machine
   the CPU ratio is the steadier figure.
2. Concurrency: a trial's sandbox from nothing to its first answer and back (filesystem, cgroup, uid,
   server), one alone and 64 at once; then throughput of 64 concurrent trials against 1, with a replay
   student that takes 200 ms per response (a stand-in for a model server). Target: speed-up >= 40.
   CPU per trial is given for this process and for the sandbox's own processes (summed from each
   sandbox's cgroup as it closes, as root), and a trial's phases are timed in the thread that runs them
   (disk and sandbox open, the agent, the verifier, closing, the result write).

Run: `.venv/bin/python -m perf.harness_overhead [--episodes N] [--trials N] [--concurrency N] [--sandbox local|none]
[--json]`."""

from __future__ import annotations

import contextlib
import json
import re
import resource
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from perf.common import command_line, printed_as_json
from unscaffold.benchmarks.harbor.suite import HarborSuite
from unscaffold.llm.registry import load_provider
from unscaffold.llm.types import Message
from unscaffold.minimal_harness.agent import Agent, AgentConfig
from unscaffold.minimal_harness.sandbox import SandboxConfig, open_sandbox
from unscaffold.minimal_harness.sandbox.disk import TrialDisk, open_trial_disk
from unscaffold.minimal_harness.sandbox.local import LocalSandbox
from unscaffold.minimal_harness.sandbox.watchdog import workspace_overflow
from unscaffold.minimal_harness.tool import EXECUTE_TOOL, system_prompt
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.run import executor as executor_module
from unscaffold.run import trial as trial_module
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run


def step_overhead(work: Path, episodes: int, kind: str, turns: int = 40) -> dict[str, float]:
    """Per-step time over whole episodes of `turns` steps, so the transcript grows as in a real trial."""
    replay = work / "steps.json"
    entries = [{"tool_call": {"name": "execute", "arguments": {"command": "true"}}}] * turns
    replay.write_text(json.dumps({"*": entries}))
    provider = load_provider(f"replay:{replay}")
    config = SandboxConfig(kind=kind, workspace=work / "ws")
    disk = open_trial_disk(config)  # as a trial has it (as root: the workspace on a filesystem of its own)
    sandbox = open_sandbox(config)
    sandbox.execute("true")  # start-up is a per-trial cost, not a per-step one
    samples: list[float] = []
    bare: list[float] = []
    writes = [0]
    save = Trajectory.save

    def counted(self: Trajectory, path: Path) -> None:
        writes[0] += 1
        save(self, path)

    Trajectory.save = counted  # type: ignore[method-assign]
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
        assert agent.writer is not None
        agent.writer.close()
    Trajectory.save = save  # type: ignore[method-assign]
    sandbox.close()
    if disk is not None:
        disk.close()
    bare_ms = statistics.median(bare) * 1000
    harness = statistics.median(samples) * 1000
    return {"bare_ms": round(bare_ms, 3), "step_ms": round(harness, 3), "ratio": round(harness / bare_ms, 3),
            f"trajectory_writes_per_{turns}_steps": round(writes[0] / episodes, 1)}


def _median_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return round(statistics.median(times) * 1000, 4)


def _cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _cgroup_cpu_s(sandbox: object) -> float | None:
    """CPU of every process in the sandbox's cgroup (v2 `cpu.stat`), where the host keeps one."""
    cgroup = getattr(sandbox, "cgroup", None)
    stat = cgroup.groups[0] / "cpu.stat" if cgroup is not None and cgroup.groups else None
    if stat is None or not stat.exists():
        return None
    fields = dict(line.split() for line in stat.read_text().splitlines())
    return int(fields["usage_usec"]) / 1e6


def step_breakdown(work: Path, kind: str, samples: int, turns: int = 40) -> dict[str, float | None]:
    """Each part of a step beyond the bash process, timed alone (medians, ms), and CPU per command."""
    config = SandboxConfig(kind=kind, workspace=work / "bd")
    disk = open_trial_disk(config)
    sandbox = open_sandbox(config)
    first = sandbox.execute("true")
    out: dict[str, float | None] = {"bare_bash_ms": _median_ms(lambda: subprocess.run(["bash", "-c", "true"]), samples)}
    inside: list[float] = []

    def round_trip() -> None:
        inside.append(sandbox.execute("true").duration_s)

    out["round_trip_ms"] = _median_ms(round_trip, samples)
    out["inside_sandbox_ms"] = round(statistics.median(inside) * 1000, 4)  # spawn to exit, by the server
    out["protocol_ms"] = round(out["round_trip_ms"] - out["inside_sandbox_ms"], 4)
    sweep = getattr(sandbox, "_end_leftovers", None)
    out["cgroup_sweep_ms"] = _median_ms(sweep, samples) if sweep is not None else None
    sandbox.execute("mkdir -p repo && cd repo && for i in $(seq 2000); do : > f$i; done")  # a small repository
    out["watchdog_2000_files_ms"] = _median_ms(lambda: workspace_overflow(Path(config.workspace), config.limits),
                                               samples)
    out["observation_ms"] = _median_ms(
        lambda: Message(role="tool", tool_call_id="c", name="execute", content=first.observation()), samples)
    traj = Trajectory(trial_id="bd", task_id="perf", suite="perf", student="replay", tools=[EXECUTE_TOOL])
    traj.messages = [Message(role="system", content=system_prompt()), Message(role="user", content="perf")]
    for i in range(turns):
        traj.messages += [Message(role="assistant", content=f"step {i}"),
                          Message(role="tool", tool_call_id=f"c{i}", name="execute", content=first.observation())]
    out[f"trajectory_save_{turns}_steps_ms"] = _median_ms(lambda: traj.save(work / "bd.json"), max(samples // 4, 5))
    host, children, box = _cpu_s(resource.RUSAGE_SELF), _cpu_s(resource.RUSAGE_CHILDREN), _cgroup_cpu_s(sandbox)
    for _ in range(samples):
        sandbox.execute("true")
    host = _cpu_s(resource.RUSAGE_SELF) - host + _cpu_s(resource.RUSAGE_CHILDREN) - children
    box_after = _cgroup_cpu_s(sandbox)
    out["cpu_host_ms_per_command"] = round(host / samples * 1000, 4)
    out["cpu_sandbox_ms_per_command"] = (round((box_after - box) / samples * 1000, 4)
                                         if box is not None and box_after is not None else None)
    sandbox.close()
    if disk is not None:
        disk.close()
    host, children = _cpu_s(resource.RUSAGE_SELF), _cpu_s(resource.RUSAGE_CHILDREN)
    for _ in range(samples):  # bash's CPU and this process's to start and reap it, as for the sandbox
        subprocess.run(["bash", "-c", "true"])
    out["cpu_bare_ms_per_command"] = round((_cpu_s(resource.RUSAGE_SELF) - host + _cpu_s(resource.RUSAGE_CHILDREN)
                                            - children) / samples * 1000, 4)
    total = out["cpu_host_ms_per_command"] + (out["cpu_sandbox_ms_per_command"] or 0.0)
    out["cpu_ratio"] = round(total / out["cpu_bare_ms_per_command"], 3) if out["cpu_bare_ms_per_command"] else None
    return out


def start_cost(work: Path, n: int, kind: str) -> dict[str, float]:
    """A trial's sandbox from nothing to its first answer and back (its own filesystem, cgroup, uid and
    server), for `n` trials at once: wall time for all, and CPU per trial (this process and its children)."""
    configs = [SandboxConfig(kind=kind, workspace=work / f"start-{n}-{i}" / "ws") for i in range(n)]
    parts: dict[str, list[float]] = {"disk_open": [], "sandbox_open": [], "first_answer": [], "sandbox_close": [],
                                     "disk_close": []}

    def one(config: SandboxConfig) -> None:
        t0 = time.perf_counter()
        disk = open_trial_disk(config)
        t1 = time.perf_counter()
        sandbox = open_sandbox(config)
        t2 = time.perf_counter()
        sandbox.execute("true")
        t3 = time.perf_counter()
        sandbox.close()
        t4 = time.perf_counter()
        if disk is not None:
            disk.close()
        t5 = time.perf_counter()
        for key, value in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True):
            parts[key].append(value)

    cpu = _cpu_s(resource.RUSAGE_SELF) + _cpu_s(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    threads = [threading.Thread(target=one, args=(c,)) for c in configs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out = {"wall_s": round(time.perf_counter() - t, 3),
           "cpu_ms_per_trial": round((_cpu_s(resource.RUSAGE_SELF) + _cpu_s(resource.RUSAGE_CHILDREN) - cpu) / n * 1000,
                                     1)}
    out.update({f"{key}_ms": round(statistics.median(v) * 1000, 1) for key, v in parts.items()})
    return out


def make_tasks(root: Path, n: int) -> Path:
    for i in range(n):
        task = root / f"t{i:02d}"
        (task / "tests").mkdir(parents=True)
        (task / "instruction.md").write_text(f"Task {i}: write ok to out.txt")
        (task / "task.toml").write_text("[verifier]\ntimeout_sec = 30\n")
        (task / "tests" / "test.sh").write_text("grep -q ok /app/out.txt && echo 1 > /logs/verifier/reward.txt\n")
    return root


class PhaseClock:
    """While in use, a trial's phases are timed in the thread that runs them (CPU of this process by
    `thread_time`, and wall), and each sandbox's own processes by its cgroup's `cpu.stat` when it closes:
    what a trial costs end to end, and where."""

    PHASES = (("disk_open", trial_module, "open_trial_disk"), ("sandbox_open", trial_module, "open_sandbox"),
              ("agent", Agent, "run"), ("verifier", HarborSuite, "score"), ("sandbox_close", LocalSandbox, "close"),
              ("disk_close", TrialDisk, "close"), ("result_write", trial_module, "write_json_atomic"),
              ("trial", executor_module, "run_trial"))

    def __init__(self) -> None:
        self.cpu: dict[str, float] = dict.fromkeys((name for name, _, _ in self.PHASES), 0.0)
        self.wall = dict(self.cpu)
        self.sandbox_cpu_s = 0.0
        self._lock = threading.Lock()
        self._saved: list[tuple[object, str, object]] = []

    def _timed(self, name: str, fn: Callable[..., object]) -> Callable[..., object]:
        def timed(*args: object, **kwargs: object) -> object:
            if name == "sandbox_close" and args and isinstance(args[0], LocalSandbox):
                used = _cgroup_cpu_s(args[0])
                with self._lock:
                    self.sandbox_cpu_s += used or 0.0
            cpu, wall = time.thread_time(), time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                with self._lock:
                    self.cpu[name] += time.thread_time() - cpu
                    self.wall[name] += time.perf_counter() - wall
        return timed

    def __enter__(self) -> PhaseClock:
        for name, owner, attr in self.PHASES:
            original = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
            self._saved.append((owner, attr, original))
            setattr(owner, attr, self._timed(name, original))
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, attr, original in reversed(self._saved):
            setattr(owner, attr, original)
        self._saved.clear()

    def per_trial_ms(self, trials: int) -> dict[str, dict[str, float]]:
        return {name: {"cpu": round(self.cpu[name] / trials * 1000, 2),
                       "wall": round(self.wall[name] / trials * 1000, 1)} for name in self.cpu}


def throughput(work: Path, trials: int, concurrency: int, latency: float, kind: str, executor: str = "local",
               label: str = "", clock: PhaseClock | None = None) -> float:
    replay = work / "student.json"
    step = {"tool_call": {"name": "execute", "arguments": {"command": "echo ok > out.txt"}}}
    if not replay.exists():  # unchanged between measurements, so a Ray node's cache of it stays valid
        replay.write_text(json.dumps({"*": [step, step, step, {"content": "done"}]}))
    tasks = work / f"tasks-{trials}"
    if not tasks.exists():
        make_tasks(tasks, trials)
    out = work / f"run-{re.split('[:?]', executor)[0]}-{concurrency}-{trials}{label}"
    with clock or contextlib.nullcontext():
        t = time.perf_counter()
        summary = run(RunConfig(suite="harbor", data=tasks, student=f"replay:{replay}?latency={latency}", out=out,
                                concurrency=concurrency, sandbox=kind, executor=executor))
        elapsed = time.perf_counter() - t
    assert summary.pass_at_1 == 100.0, summary
    return trials / elapsed


def main() -> None:
    parser = command_line(__doc__, concurrency=64, latency=0.2)
    parser.add_argument("--episodes", type=int, default=5, help="40-step episodes timed step by step")
    parser.add_argument("--samples", type=int, default=200, help="timings per part of the step breakdown")
    parser.add_argument("--trials", type=int, default=64, help="trials of the concurrent run")
    parser.add_argument("--serial-trials", type=int, default=8, help="trials of the one-at-a-time run")
    parser.add_argument("--sandbox", default="local", choices=["local", "none"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="unscaffold-perf-") as tmp:
        work = Path(tmp)
        overhead = step_overhead(work, args.episodes, args.sandbox)
        breakdown = step_breakdown(work, args.sandbox, args.samples)
        start_1 = start_cost(work, 1, args.sandbox)
        start_n = start_cost(work, args.concurrency, args.sandbox)
        cpu = _cpu_s(resource.RUSAGE_SELF) + _cpu_s(resource.RUSAGE_CHILDREN)
        host = _cpu_s(resource.RUSAGE_SELF)
        clock_one = PhaseClock()
        one = throughput(work, args.serial_trials, 1, args.latency, args.sandbox, clock=clock_one)
        cpu_one = (_cpu_s(resource.RUSAGE_SELF) + _cpu_s(resource.RUSAGE_CHILDREN) - cpu) / args.serial_trials
        host_one = (_cpu_s(resource.RUSAGE_SELF) - host) / args.serial_trials
        cpu = _cpu_s(resource.RUSAGE_SELF) + _cpu_s(resource.RUSAGE_CHILDREN)
        host = _cpu_s(resource.RUSAGE_SELF)
        clock_many = PhaseClock()
        many = throughput(work, args.trials, args.concurrency, args.latency, args.sandbox, clock=clock_many)
        cpu_many = (_cpu_s(resource.RUSAGE_SELF) + _cpu_s(resource.RUSAGE_CHILDREN) - cpu) / args.trials
        host_many = (_cpu_s(resource.RUSAGE_SELF) - host) / args.trials
    n = args.concurrency
    report = {
        "sandbox": args.sandbox,
        "step": overhead,
        "breakdown": breakdown,
        "throughput": {"trials": args.trials, "serial_trials": args.serial_trials, "concurrency": n,
                       "latency_s": args.latency, "trials_per_s_1": round(one, 3), f"trials_per_s_{n}": round(many, 3),
                       f"speedup_{n}": round(many / one, 2), "cpu_ms_per_trial_1": round(cpu_one * 1000, 1),
                       f"cpu_ms_per_trial_{n}": round(cpu_many * 1000, 1),
                       "host_cpu_ms_per_trial_1": round(host_one * 1000, 1),
                       f"host_cpu_ms_per_trial_{n}": round(host_many * 1000, 1),
                       "sandbox_cpu_ms_per_trial_1": round(clock_one.sandbox_cpu_s / args.serial_trials * 1000, 1),
                       f"sandbox_cpu_ms_per_trial_{n}": round(clock_many.sandbox_cpu_s / args.trials * 1000, 1)},
        "trial_phases_ms": {"1": clock_one.per_trial_ms(args.serial_trials),
                            str(n): clock_many.per_trial_ms(args.trials)},
        "sandbox_start": {"1": start_1, str(n): start_n},
        "targets": {"step_ratio_max": 1.2, f"speedup_{n}_min": 40.0 if n == 64 else None},
    }
    if printed_as_json(report, args.json):
        return
    print(f"per-step: h {overhead['step_ms']:.2f} ms vs bare bash {overhead['bare_ms']:.2f} ms -> "
          f"ratio {overhead['ratio']:.2f} (target <= 1.2); CPU ratio {breakdown['cpu_ratio']}; "
          f"{overhead['trajectory_writes_per_40_steps']:g} trajectory writes per 40 steps")
    print("  where a step goes (medians, ms; CPU per command, ms): " + ", ".join(
        f"{k} {v:g}" for k, v in breakdown.items() if v is not None))
    for label, cost in (("1", start_1), (str(n), start_n)):
        print(f"  sandbox start to first answer and back, {label} at once: {cost['wall_s']:.2f} s wall, "
              f"{cost['cpu_ms_per_trial']:.1f} ms CPU per trial; medians (ms): " + ", ".join(
                  f"{k[:-3]} {v:g}" for k, v in cost.items() if k.endswith("_ms")))
    t = report["throughput"]
    print(f"throughput: {t[f'trials_per_s_{n}']:.2f} trials/s at {n}-way vs {t['trials_per_s_1']:.2f} at 1-way -> "
          f"speed-up {t[f'speedup_{n}']:.2f}x" + (" (target >= 40)" if n == 64 else ""))
    print(f"  CPU per trial (this process and its reaped children): {t['cpu_ms_per_trial_1']:.1f} ms at 1-way, "
          f"{t[f'cpu_ms_per_trial_{n}']:.1f} ms at {n}-way")
    print(f"  CPU per trial, this process / the sandbox's processes (their cgroup): {t['host_cpu_ms_per_trial_1']:.1f}"
          f" / {t['sandbox_cpu_ms_per_trial_1']:.1f} ms at 1-way, {t[f'host_cpu_ms_per_trial_{n}']:.1f} / "
          f"{t[f'sandbox_cpu_ms_per_trial_{n}']:.1f} ms at {n}-way")
    for label, phases in report["trial_phases_ms"].items():
        print(f"  a trial's phases at {label}-way (ms per trial, CPU of this process / wall): " + ", ".join(
            f"{name} {v['cpu']:g}/{v['wall']:g}" for name, v in phases.items()))


if __name__ == "__main__":
    main()
