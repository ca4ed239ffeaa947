"""`unscaffold rescue ...`: Harness-S commands (simulate, pool, train, route, validation)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from unscaffold.cli_exit import exit_on_problem, fail
from unscaffold.cli_options import command_from_model, setting_argument, suite_arguments
from unscaffold.console import err_console, out_console
from unscaffold.outcomes import Outcome
from unscaffold.rescue.settings import PoolSettings, RouteConfig, SimulateSettings, ValidationRuns
from unscaffold.rescue.train import RescueTrainConfig
from unscaffold.terminal_text import inert

rescue_app = typer.Typer(add_completion=False, no_args_is_help=True,
                         help="Harness-S, sibling-harness rescue RL: simulate it, write a pool's "
                         "siblings, train with it, route tasks to siblings, and build the routers' validation table.")




PUBLISHED_NOTE = (
    "published (Harness-S, AppWorld): effective group rate GRPO 64.69%, same-harness 70.94%, Harness-S 79.38%; "
    "extra rollouts same-harness 41.25%, Harness-S 18.44%; rescue success random 18-25%, rule 27-44%, adaptive "
    "46-67%. The simulator's router quality (--rule-precision, --adaptive-precision) and --transfer are inputs: "
    "rule against adaptive, and any gain in base success, follow from them.")


def simulate_command(s: SimulateSettings, values: dict[str, Any]) -> None:
    """Compare grpo, same_harness, random, rule and adaptive rescue on synthetic success probabilities."""
    from unscaffold.iojson import write_json_atomic
    from unscaffold.rescue.sim_page import simulation_page
    from unscaffold.rescue.simulate import run_simulation

    seed, as_json, out = s.seed, s.as_json, s.out
    result = run_simulation(s.knobs, seed=seed)
    data = result.model_dump(mode="json")
    if out is not None:
        write_json_atomic(out / "simulation.json", data)
        simulation_page(result, out / "simulation.html")
    if as_json:
        sys.stdout.write(json.dumps(data, indent=1) + "\n")
        return
    table = Table(title=f"rescue simulator (seed {seed})")
    for col in ("method", "effective group rate", "rescue success", "extra rollouts %", "final base success"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for name, r in result.methods.items():
        table.add_row(name, f"{r.effective_group_rate:.3f}", f"{r.rescue_success_rate:.3f}",
                      f"{r.extra_rollout_pct:.1f}", f"{r.final_base_success:.3f}")
    out_console().print(table)
    sweep = Table(title="adaptive > same_harness > grpo (effective group rate) as a knob moves")
    sweep.add_column("knob")
    for p in next(iter(result.sweeps.values())):
        sweep.add_column(f"{p.value:g}", justify="center")
    for knob, pts in result.sweeps.items():
        sweep.add_row(knob, *[("holds " if p.ordering_holds else "BREAKS ")
                              + f"{p.effective_group_rate['adaptive'] - p.effective_group_rate['same_harness']:+.3f}"
                              for p in pts])
    out_console().print(sweep)
    out_console().print(PUBLISHED_NOTE, highlight=False, soft_wrap=True)
    out_console().print(f"ordering at these knobs: {'holds' if result.ordering_holds else 'BREAKS'}"
                        + (f"; written to {out}" if out else ""), highlight=False)


rescue_app.command("simulate")(command_from_model(SimulateSettings, "rescue simulate", [], simulate_command))


def pool_command(s: PoolSettings, values: dict[str, Any]) -> None:
    """Write a pool's siblings as bank folders (each runs under `unscaffold run --harness PATH`)."""
    from unscaffold.rescue.pool import load_pool, materialise, shipped_pool

    pool, out = s.pool, s.out
    path = pool if pool.suffix == ".toml" else shipped_pool(str(pool))
    loaded = materialise(load_pool(path), out)
    table = Table(title=f"pool {loaded.spec.name} ({loaded.suite})")
    for col in ("sibling", "parent", "repairs", "bank"):
        table.add_column(col)
    for sib in loaded.spec.siblings:
        table.add_row(sib.name, sib.parent, ", ".join(sib.repairs), str(loaded.banks[sib.name]))
    out_console().print(table)


rescue_app.command("pool")(command_from_model(PoolSettings, "rescue pool", [
    setting_argument(PoolSettings, "pool", Path)], pool_command))


def train_command(config: RescueTrainConfig, values: dict[str, Any]) -> None:
    """Rescue GRPO: all-fail groups are re-sampled under router-picked siblings (TRL GRPOTrainer)."""
    from unscaffold.rescue.train import check_options, train

    out = config.out
    check_options(config)  # before the bar: a refused option is one line
    if not values["no_preflight"]:
        from unscaffold.preflight import check_models, model_path_problem, vllm_problem

        check_models([*(("--profiler", p) for p in config.profilers), *(("--voter", v) for v in config.voters)],
                     config.sandbox, extra=[lambda: vllm_problem(config.use_vllm),
                                            lambda: model_path_problem(config.model, f"--model {config.model}")])
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from unscaffold.rescue.train import world_rank

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=err_console(), disable=world_rank() > 0)
    job = bar.add_task("rescue GRPO generations", total=-(-config.max_steps // (config.steps_per_generation
                                                                            * config.num_iterations)))

    def step(line: dict) -> None:
        bar.update(job, advance=1, description=f"rescue GRPO generations (effective groups "
                                               f"{line['effective_group_rate']:.2f})")

    with bar:
        summary = train(config, progress=step)
    if world_rank() > 0:  # under accelerate launch the main process reports
        return
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    table = Table(title=f"rescue GRPO on {config.suite} ({summary['router']} router)")
    for col in ("step", "effective groups", "GRPO would have", "rescued", "rescue success", "rollouts",
                "extra %", "prefers base"):
        table.add_column(col, justify="right")
    for m in lines:
        table.add_row(str(m["step"]), f"{m['effective_group_rate']:.2f}", f"{m['base_effective_group_rate']:.2f}",
                      str(m["rescued_groups"]), f"{m['rescue_success_rate']:.2f}", str(m["rollouts"]),
                      f"{m['extra_rollout_pct']:.0f}", f"{m['base_preferred_rate']:.2f}")
    out_console().print(table)
    for note in summary.get("notes", []):
        err_console().print(f"note: {note}", highlight=False)
    if not summary.get("trained", True):
        err_console().print(f"warning: not trained: {summary['not_trained_reason']}", style="yellow",
                            highlight=False)
    out_console().print(f"{summary['steps']} optimiser steps over {summary['generation_batches']} generation "
                        f"batches, effective group rate {summary['effective_group_rate']:.3f} "
                        f"(plain GRPO {summary['base_effective_group_rate']:.3f}), {summary['rescued_groups']} "
                        f"rescued, +{summary['extra_rollout_pct']:.1f}% rollouts; adapter: {out / 'adapter'}; "
                        f"plot: {out / 'metrics.html'}", highlight=False)


rescue_app.command("train")(command_from_model(
    RescueTrainConfig, "rescue train", suite_arguments(RescueTrainConfig), train_command))


def route_command(config: RouteConfig, values: dict[str, Any]) -> None:
    """Rank-1 routing: each task runs under the harness the router ranks first."""
    from unscaffold.minimal_harness.sandbox.base import SandboxSettings
    from unscaffold.rescue.pool import load_pool, materialise, shipped_pool
    from unscaffold.rescue.route import run_routed
    from unscaffold.rescue.router_loader import load_router
    from unscaffold.rescue.settings import default_router
    from unscaffold.rescue.validation import load_table
    from unscaffold.run.folder import RunFolder
    from unscaffold.run.models import RunConfig

    suite, out = config.suite, config.out
    if not values["no_preflight"]:
        from unscaffold.preflight import check_run

        check_run(config.student, None, config.sandbox, others=[*(("--profiler", p) for p in config.profilers),
                                                                *(("--voter", v) for v in config.voters)])
    loaded = materialise(load_pool(config.pool or shipped_pool(suite)), RunFolder(out).pool_dir)
    table = load_table(config.validation) if config.validation else None
    chooser = load_router(default_router(config.router, config.validation), loaded.names, table,
                          seed=config.seed, profilers=config.profilers or None, voters=config.voters or None)
    run_config = RunConfig(suite=suite, student=config.student, out=out, split=config.split, data=config.data,
                           split_file=config.split_file, trials=config.trials, task_ids=config.task_ids,
                           concurrency=config.concurrency, sandbox=SandboxSettings(kind=config.sandbox))
    summary = run_routed(run_config, loaded, chooser)
    print_routed_run(suite, summary, out)


def print_routed_run(suite: str, summary: dict[str, Any], out: Path) -> None:
    """How a routed run ends, from `rescue route` or `run --harness route:POOL`: which harness each task ran
    under and its reward, pass@1, then exit 1 where the run is not a clean result."""
    from unscaffold.run.folder import RunFolder

    table = Table(title=f"{suite}: rank-1 routing ({summary['router']} router)")
    for name, justify in (("task", "left"), ("harness", "left"), ("reward", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for tid, harness in sorted(summary["harness_per_task"].items()):
        table.add_row(inert(tid), inert(harness), f"{summary['per_task'].get(tid, 0.0):.2f}")
    out_console().print(table)
    out_console().print(f"pass@1 {summary['pass_at_1']:.2f}% over {summary['n_tasks']} tasks; "
                        f"results: {RunFolder(out).results}", highlight=False)
    exit_on_problem(summary)


rescue_app.command("route")(command_from_model(RouteConfig, "rescue route", suite_arguments(RouteConfig),
                                               route_command))


def _results(run: Path) -> Any:
    """A run's results.json, or None where there is none readable (table_from_runs says what is missing)."""
    from unscaffold.errors import InputError
    from unscaffold.run.folder import RunFolder

    try:
        return RunFolder(run).read_results()
    except InputError:
        return None


def validation_command(config: ValidationRuns, values: dict[str, Any]) -> None:
    """Join validation runs (one per harness) into the table the rule and adaptive routers read."""
    from unscaffold.benchmarks import load_suite
    from unscaffold.errors import InputError
    from unscaffold.iojson import write_json_atomic
    from unscaffold.rescue.validation import table_from_runs

    runs = {}
    for item in config.runs:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise InputError("--run", None, f"{item!r}: expected HARNESS=RUN_DIR")
        runs[name] = Path(path)
    stalled = next((f"--run {n}={p}: every trial failed for infrastructure ({r.infra_cause}): run it again "
                    "once the cause is fixed" for n, p in runs.items() if (r := _results(p))
                    and r.n_trials and r.outcomes.get(Outcome.INFRA_ERROR) == r.n_trials), None)
    if stalled:  # a run that could not run says nothing of its harness: exit 1, as the run itself did
        fail(stalled, 1)
    with load_suite(config.suite, config.data, config.split_file) as loaded:
        tasks = [t for split in loaded.splits() for t in loaded.tasks(split)]
    table = table_from_runs(runs, {t.id: t.instruction for t in tasks}, {t.id: t.split for t in tasks})
    write_json_atomic(config.out, table.model_dump(mode="json"))
    out_console().print(f"{len(table.tasks)} validation tasks x {len(table.harnesses())} harnesses -> {config.out}",
                        highlight=False)


rescue_app.command("validation")(command_from_model(ValidationRuns, "rescue validation", [
    setting_argument(ValidationRuns, "suite", str),
], validation_command))
