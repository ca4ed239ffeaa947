"""What running trials as Ray tasks costs, as ratios against local threads measured in the same run.

At each concurrency (2, 4, 8, 16 by default) the same synthetic Harbor trials run with a replay student that
takes 200 ms per response (a stand-in for a model server), once on local threads and once as Ray tasks on a
local Ray instance started once for the whole script. Overhead = local trials/s over Ray trials/s.
Target: <= 1.25 at every concurrency; the growth from the lowest to the highest concurrency is printed too.

Run: `.venv/bin/python perf/ray_overhead.py [--trials N] [--latency S] [--concurrency 2,4,8,16] [--json]`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
from pathlib import Path

from harness_overhead import throughput

TARGET = 1.25


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=48, help="trials per measurement")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per student response")
    parser.add_argument("--concurrency", default="2,4,8,16", help="comma-separated trials in flight")
    parser.add_argument("--cpus-per-trial", type=float, default=1.0, help="what each Ray task declares")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        import ray
    except ImportError:
        raise SystemExit("Ray is not installed here: install it with `pip install 'unscaffold[ray]'`") from None
    levels = [int(c) for c in args.concurrency.split(",")]
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    cpus = max(os.cpu_count() or 1, int(max(levels) * args.cpus_per_trial + 0.999))
    ray.init(num_cpus=cpus, include_dashboard=False, logging_level=logging.WARNING)
    executor = f"ray?cpus={args.cpus_per_trial}"
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="unscaffold-perf-") as tmp:
            work = Path(tmp)
            throughput(work, args.trials, max(levels), 0.0, "local", executor, label="-warm")  # workers start once
            for level in levels:
                local = throughput(work, args.trials, level, args.latency, "local")
                remote = throughput(work, args.trials, level, args.latency, "local", executor)
                rows.append({"concurrency": level, "local_trials_per_s": round(local, 3),
                             "ray_trials_per_s": round(remote, 3), "overhead": round(local / remote, 3)})
    finally:
        ray.shutdown()
    growth = rows[-1]["overhead"] / rows[0]["overhead"]
    report = {"trials": args.trials, "latency_s": args.latency, "ray_cpus": cpus, "rows": rows,
              "overhead_growth": round(growth, 3), "target_overhead_max": TARGET}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for row in rows:
        print(f"concurrency {row['concurrency']:>2}: local {row['local_trials_per_s']:.2f} trials/s, "
              f"ray {row['ray_trials_per_s']:.2f} trials/s -> overhead {row['overhead']:.2f}x (target <= {TARGET})")
    print(f"overhead growth from {rows[0]['concurrency']} to {rows[-1]['concurrency']} concurrent trials: "
          f"{growth:.2f}x")


if __name__ == "__main__":
    main()
