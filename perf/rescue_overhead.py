"""What the rescue step costs per optimiser step against plain TRL GRPOTrainer, when no group needs rescue.

Both trainers run the same tiny model, the same appworld_lite train tasks, the same harness
environments and GRPOConfig (`rescue train`'s own setup); the verifier is wrapped so every group holds a
success and a failure, so the rescue trainer never re-generates and what remains is its bookkeeping
(reward capture, advantage recomputation, the gathers, the recorder, the harnesses' own tool schemas).
Only `trainer.train()` is timed (model loading, adapter saving and plots are the same for both and left
out), as wall time and as CPU time of this process and its reaped children (the sandboxes), since the
machine may be shared. The two alternate `--repeats` times and the fastest of each is kept.
Overhead = rescue seconds per step over plain seconds per step. Target: <= 1.3.

Run: `.venv/bin/python -m perf.rescue_overhead [--steps N] [--k K] [--repeats R] [--json]` (needs bubblewrap)."""

from __future__ import annotations

import itertools
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from perf.common import command_line, printed_as_json

TARGET = 1.3


def cpu_s() -> float:
    """CPU seconds of this process and of its children that have ended (rollout sandboxes)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(cls: type, into: dict[str, float]) -> type:
    """`cls` whose `train()` records its wall and CPU seconds in `into`."""

    class Timed(cls):  # type: ignore[misc, valid-type]
        def train(self, *args: Any, **kwargs: Any) -> Any:
            wall, cpu = time.perf_counter(), cpu_s()
            try:
                return super().train(*args, **kwargs)
            finally:
                into.update(wall=time.perf_counter() - wall, cpu=cpu_s() - cpu)

    return Timed


def run_once(kind: str, out: Path, steps: int, k: int, model: str = "tiny", completion: int = 32) -> dict[str, float]:
    """Seconds per optimiser step of one `rescue train` run, wall and CPU."""
    from trl import GRPOTrainer

    import unscaffold.rescue.trl_rescue as trl_rescue
    from unscaffold.rescue.train import RescueTrainConfig, train

    real = trl_rescue.RescueGRPOTrainer

    class PlainGRPO(GRPOTrainer):
        """TRL's trainer as it is; the rescue-only arguments are dropped."""

        def __init__(self, *args: Any, rescue: Any = None, tool_schemas: Any = None, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)

    seconds: dict[str, float] = {}
    trl_rescue.RescueGRPOTrainer = timed(PlainGRPO if kind == "plain" else real, seconds)  # type: ignore[misc]
    try:
        config = RescueTrainConfig(suite="appworld_lite", model=model, out=out, router="random", max_steps=steps,
                                   k=k, tasks_per_step=1, steps_per_generation=1, max_completion_length=completion)
        summary = train(config)
        if kind == "rescue":
            assert summary["rescued_groups"] == 0, "a group needed rescue: the comparison would not be like for like"
        return {"wall": seconds["wall"] / steps, "cpu": seconds["cpu"] / steps}
    finally:
        trl_rescue.RescueGRPOTrainer = real  # type: ignore[misc]


def mixed_rewards() -> None:
    """Every group of even K holds a success and a failure, so no group needs rescue (the real verifier still
    runs and cleans up): what is left to compare is the rescue trainer's bookkeeping."""
    from unscaffold.rescue.environment import HarnessEnvironment

    original = HarnessEnvironment.get_reward
    counter = itertools.count()

    def mixed(self: HarnessEnvironment) -> float:
        original(self)
        return float(next(counter) % 2)

    HarnessEnvironment.get_reward = mixed  # type: ignore[method-assign]


def main() -> None:
    args = command_line(__doc__, steps=4, k=4, repeats=2).parse_args()
    mixed_rewards()
    best = {kind: {"wall": float("inf"), "cpu": float("inf")} for kind in ("plain", "rescue")}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for kind in ("plain", "rescue"):
                got = run_once(kind, Path(tmp) / f"{kind}-{r}", args.steps, args.k)
                best[kind] = {m: min(best[kind][m], got[m]) for m in got}
    ratio = best["rescue"]["wall"] / best["plain"]["wall"]
    cpu_ratio = best["rescue"]["cpu"] / best["plain"]["cpu"]
    result = {"plain_s_per_step": round(best["plain"]["wall"], 3),
              "rescue_s_per_step": round(best["rescue"]["wall"], 3),
              "plain_cpu_s_per_step": round(best["plain"]["cpu"], 3),
              "rescue_cpu_s_per_step": round(best["rescue"]["cpu"], 3),
              "overhead": round(ratio, 3), "cpu_overhead": round(cpu_ratio, 3), "target": TARGET,
              "meets_target": ratio <= TARGET, "steps": args.steps, "k": args.k}
    if not printed_as_json(result, args.json):
        print(f"plain GRPOTrainer {best['plain']['wall']:.2f} s/step ({best['plain']['cpu']:.2f} CPU s), rescue "
              f"{best['rescue']['wall']:.2f} s/step ({best['rescue']['cpu']:.2f} CPU s): overhead {ratio:.2f}x wall, "
              f"{cpu_ratio:.2f}x CPU (target <= {TARGET}x) {'OK' if ratio <= TARGET else 'ABOVE TARGET'}")


if __name__ == "__main__":
    main()
