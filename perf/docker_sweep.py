"""What the docker sandbox's leftover-process sweep costs per command, as ratios against the same command
without it, in one container in the same run.

After every command `DockerSandbox.execute` lists the container's processes and, when the command left
one, freezes the container, kills the leftovers from the host, thaws it and lists again until they are
gone: through the container's own cgroup where the engine runs here and this process is root, else
through the engine (`docker top`, pause, unpause); the line says which. Three cases alternate `--rounds`
times, each command `true`:
- `exec`: the `docker exec` alone (no sweep: the baseline);
- `exec+sweep`: what a trial runs, nothing left (one listing);
- `exec+sweep, one left`: the command leaves a `setsid sleep` daemon (freeze, list, kill, thaw, list).
Medians in ms, and each over the baseline; one `docker top` alone for scale. Skipped, saying so, where no
Docker engine answers or the suites' image cannot be made (`scripts/with-docker.sh` starts an engine and builds it).

Run: `.venv/bin/python -m perf.docker_sweep [--rounds N] [--json]`."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from perf.common import command_line, print_block, printed_as_json
from unscaffold.errors import EnvironmentBroken, SandboxUnavailable
from unscaffold.minimal_harness.sandbox.base import SandboxConfig
from unscaffold.minimal_harness.sandbox.docker_sandbox import DockerSandbox, connect, ensure_image

DAEMON = "setsid sleep 1000 > /dev/null 2>&1 < /dev/null & true"


def ms(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return (time.perf_counter() - start) * 1000


def measure(sandbox: DockerSandbox, rounds: int) -> dict[str, list[float]]:
    """Per case, the time of each round; the cases alternate so load changes reach them alike."""
    times: dict[str, list[float]] = {"exec": [], "exec+sweep": [], "exec+sweep, one left": [], "docker top": []}
    for _ in range(rounds):
        times["exec"].append(ms(lambda: sandbox._execute("true", None)))  # the command without the sweep
        times["exec+sweep"].append(ms(lambda: sandbox.execute("true")))
        times["exec+sweep, one left"].append(ms(lambda: sandbox.execute(DAEMON)))
        times["docker top"].append(ms(sandbox.container.top))
    return times


def main() -> None:
    args = command_line(__doc__, rounds=30).parse_args()
    with tempfile.TemporaryDirectory(prefix="unscaffold-perf-") as work:
        config = SandboxConfig(kind="docker", workspace=Path(work) / "ws", workdir="/app")
        try:
            client = connect()
            config = config.model_copy(update={"image": ensure_image(client, config)})
            sandbox = DockerSandbox(config, client=client)
        except (SandboxUnavailable, EnvironmentBroken) as e:
            print(f"docker_sweep: skipped: {e}")
            return
        with sandbox:
            sandbox.execute("true")  # the first exec warms the engine's paths
            times = measure(sandbox, args.rounds)
            restarts = sandbox.restarts
            through = "the container's cgroup" if sandbox._group is not None else "the engine (docker top, pause)"
    medians = {case: statistics.median(values) for case, values in times.items()}
    base = medians["exec"]
    figures = {"rounds": args.rounds, "through": through, "median_ms": medians, "restarts": restarts,
               "ratio": {case: medians[case] / base for case in ("exec+sweep", "exec+sweep, one left")}}
    if printed_as_json(figures, args.json):
        return
    print_block(f"docker sweep through {through}, {args.rounds} rounds (medians; ratio against the exec alone):", [
        f"exec alone: {base:.1f} ms",
        f"exec+sweep, nothing left: {medians['exec+sweep']:.1f} ms ({figures['ratio']['exec+sweep']:.2f}x)",
        f"exec+sweep, one daemon left: {medians['exec+sweep, one left']:.1f} ms "
        f"({figures['ratio']['exec+sweep, one left']:.2f}x)",
        f"one docker top: {medians['docker top']:.1f} ms; container restarts: {restarts}",
    ])


if __name__ == "__main__":
    main()
