"""What running trials on Ray costs, as ratios against local threads measured in the same run.

At each concurrency (64 by default) the same synthetic Harbor trials run with a replay student that takes
200 ms per response (a stand-in for a model server), once on local threads and once on a local Ray instance
started once for the whole script (one runner actor holds the node's trials in threads). Overhead = local
trials/s over Ray trials/s, the Ray run's start (its runner's process, the suite loaded there, the sandbox
probe) included. CPU time is printed beside wall time: this process, its descendants (the Ray instance's
raylet, GCS and workers) and their waited-for children, for both executors.
Target: overhead <= 1.25 at every concurrency.

Run: `.venv/bin/python -m perf.ray_overhead [--trials N] [--latency S] [--concurrency 64] [--rounds 2] [--json]`."""

from __future__ import annotations

import logging
import os
import resource
import tempfile
import time
from pathlib import Path

import psutil

from perf.common import command_line, printed_as_json
from perf.harness_overhead import throughput

TARGET = 1.25


def tree_cpu() -> dict[int, float]:
    """CPU seconds by process: this one with its waited-for children, and every live descendant (the Ray
    instance: raylet, GCS, workers) with its own waited-for children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    seen = {os.getpid(): own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime}
    for proc in psutil.Process().children(recursive=True):
        try:
            t = proc.cpu_times()
            seen[proc.pid] = t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            pass
    return seen


def cpu_since(before: dict[int, float]) -> float:
    """CPU spent since `before` by the processes alive now (one that ended counts in the parent that waited
    for it, as a whole: Ray's processes may be over-counted, never under-counted)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in tree_cpu().items())


STARTS: list[float] = []  # seconds each Ray executor took to open (runners started, state loaded, probed)


def timed_starts() -> None:
    """Record how long each Ray executor takes to open, so the report can show start-up apart."""
    from unscaffold.run.ray_executor import RayExecutor

    opened = RayExecutor.__init__

    def init(self: RayExecutor, *args: object, **kwargs: object) -> None:
        t = time.perf_counter()
        opened(self, *args, **kwargs)  # type: ignore[arg-type]
        STARTS.append(time.perf_counter() - t)

    RayExecutor.__init__ = init  # type: ignore[method-assign]


def measured(work: Path, trials: int, level: int, latency: float, executor: str, label: str
             ) -> tuple[float, float, float]:
    """(trials/s, CPU s per trial, start-up s) of one run."""
    before, starts = tree_cpu(), len(STARTS)
    rate = throughput(work, trials, level, latency, "local", executor, label=label)
    return rate, cpu_since(before) / trials, sum(STARTS[starts:])


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--trials", type=int, default=128, help="trials per measurement")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per student response")
    parser.add_argument("--concurrency", default="64", help="comma-separated trials in flight")
    parser.add_argument("--cpus-per-trial", type=float, default=1.0, help="what each trial declares to Ray")
    parser.add_argument("--rounds", type=int, default=2, help="local and Ray alternate this many times; the best "
                        "of each is kept")
    args = parser.parse_args()
    try:
        import ray
    except ImportError:
        raise SystemExit("Ray is not installed here: install it with `pip install 'unscaffold[ray]'`") from None
    levels = [int(c) for c in args.concurrency.split(",")]
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    cpus = max(os.cpu_count() or 1, int(max(levels) * args.cpus_per_trial + 0.999))
    ray.init(num_cpus=cpus, include_dashboard=False, logging_level=logging.WARNING)
    timed_starts()
    executor = f"ray?cpus={args.cpus_per_trial}"
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="unscaffold-perf-") as tmp:
            work = Path(tmp)
            throughput(work, 2, 2, 0.0, "local", executor, label="-warm")  # Ray's first worker start, imports
            for level in levels:
                local, remote = (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
                for n in range(args.rounds):  # alternated, so a burst of load elsewhere hits both alike
                    here = measured(work, args.trials, level, args.latency, "local", f"-{n}")
                    there = measured(work, args.trials, level, args.latency, executor, f"-{n}")
                    local, remote = max(local, here), max(remote, there)
                rows.append({"concurrency": level, "local_trials_per_s": round(local[0], 3),
                             "ray_trials_per_s": round(remote[0], 3), "overhead": round(local[0] / remote[0], 3),
                             "local_cpu_ms_per_trial": round(local[1] * 1000, 1),
                             "ray_cpu_ms_per_trial": round(remote[1] * 1000, 1),
                             "cpu_ratio": round(remote[1] / local[1], 3), "ray_start_s": round(remote[2], 2)})
    finally:
        ray.shutdown()
    report = {"trials": args.trials, "latency_s": args.latency, "ray_cpus": cpus, "rounds": args.rounds,
              "rows": rows, "target_overhead_max": TARGET, "at": time.strftime("%Y-%m-%d %H:%M")}
    if printed_as_json(report, args.json):
        return
    for row in rows:
        print(f"ray: {args.trials} trials at concurrency {row['concurrency']}, {args.latency * 1000:.0f} ms per "
              f"response, best of {args.rounds}: local threads {row['local_trials_per_s']:.2f} trials/s "
              f"({row['local_cpu_ms_per_trial']:.0f} ms CPU a trial), Ray {row['ray_trials_per_s']:.2f} trials/s "
              f"({row['ray_cpu_ms_per_trial']:.0f} ms CPU a trial, Ray's processes included) -> overhead "
              f"{row['overhead']:.2f}x (target <= {TARGET}), CPU ratio {row['cpu_ratio']:.2f}; the Ray run's start "
              f"(runner started, suite loaded, sandbox probed) took {row['ray_start_s']:.2f} s")


if __name__ == "__main__":
    main()
