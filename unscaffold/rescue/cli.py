"""`unscaffold rescue ...`: Harness-S commands (simulate, pool, train, route, validation)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from unscaffold.cli_exit import exit_on_problem, fail
from unscaffold.errors import UnscaffoldError

rescue_app = typer.Typer(add_completion=False, no_args_is_help=True,
                         help="Harness-S, sibling-harness rescue RL: simulate it, write a pool's "
                         "siblings, train with it, route tasks to siblings, and build the routers' validation table.")


# The pool and router options `train` and `route` share.
PoolOption = Annotated[Path | None, typer.Option(help="pool.toml (default: the suite's shipped pool).")]
RouterOption = Annotated[str | None, typer.Option(help="random, rule, adaptive, or the router.json a `rescue train` "
                                                  "left (the trained router) (default: rule with --validation, "
                                                  "else random).")]
ValidationOption = Annotated[Path | None, typer.Option(help="Validation table JSON (rule, adaptive).")]
ModelsOption = Annotated[list[str] | None, typer.Option(help="Model spec writing adaptive profiles (repeat).")]
VotersOption = Annotated[list[str] | None, typer.Option(help="Model spec voting (default: the profilers).")]
DataOption = Annotated[Path | None, typer.Option(help="Real data for the suite.")]
SplitFileOption = Annotated[Path | None, typer.Option(help="Real data's train/validation/test ids (test ids are "
                                                      "refused where tasks feed training or a router).")]
NoPreflightOption = Annotated[bool, typer.Option("--no-preflight", help="Skip the checks that every model, "
                                                 "adapter and sandbox answers before the first trial.")]


PUBLISHED_NOTE = (
    "published (Harness-S, AppWorld): effective group rate GRPO 64.69%, same-harness 70.94%, Harness-S 79.38%; "
    "extra rollouts same-harness 41.25%, Harness-S 18.44%; rescue success random 18-25%, rule 27-44%, adaptive "
    "46-67%. The simulator's router quality (--rule-precision, --adaptive-precision) and --transfer are inputs: "
    "rule against adaptive, and any gain in base success, follow from them.")


@rescue_app.command("simulate")
def simulate_command(
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON on stdout.")] = False,
    out: Annotated[Path | None, typer.Option(help="Folder for simulation.json and simulation.html.")] = None,
    locality: Annotated[float, typer.Option(min=0, max=1, help="How task-specific siblings' effects are.")] = 0.8,
    complementarity: Annotated[float, typer.Option(min=0, max=1, help="How different the causes siblings "
                                                   "repair are.")] = 0.8,
    nonstationarity: Annotated[float, typer.Option(min=0, help="Drift of sibling effects per step.")] = 0.15,
    improvement: Annotated[float, typer.Option(min=0, help="Logit gained by a task per effective group.")] = 0.25,
    transfer: Annotated[float, typer.Option(min=0, max=1, help="Share of what a rescue group under siblings "
                                            "teaches that carries back to the base harness.")] = 0.5,
    rule_precision: Annotated[float, typer.Option(min=0, max=1, help="Input: share of the rule router's nearest "
                                                  "validation tasks sharing the task's cause.")] = 0.6,
    adaptive_precision: Annotated[float, typer.Option(min=0, max=1, help="Input: the same for each adaptive "
                                                      "voter.")] = 0.85,
    steps: Annotated[int, typer.Option(min=1)] = 20,
    repeats: Annotated[int, typer.Option(min=1, help="Worlds averaged per figure.")] = 4,
) -> None:
    """Compare grpo, same_harness, random, rule and adaptive rescue on synthetic success probabilities."""
    from unscaffold.iojson import write_json_atomic
    from unscaffold.rescue.plot import write_simulation_plot
    from unscaffold.rescue.simulate import Knobs, run_simulation

    knobs = Knobs(locality=locality, complementarity=complementarity, nonstationarity=nonstationarity,
                  improvement=improvement, transfer=transfer, rule_precision=rule_precision,
                  adaptive_precision=adaptive_precision, steps=steps, repeats=repeats)
    result = run_simulation(knobs, seed=seed)
    data = result.model_dump(mode="json")
    if out is not None:
        write_json_atomic(out / "simulation.json", data)
        write_simulation_plot({m: r.effective_group_rate for m, r in result.methods.items()},
                              {k: {m: [(p.value, p.effective_group_rate[m]) for p in pts] for m in result.methods}
                               for k, pts in result.sweeps.items()}, out / "simulation.html")
    if as_json:
        sys.stdout.write(json.dumps(data, indent=1) + "\n")
        return
    table = Table(title=f"rescue simulator (seed {seed})")
    for col in ("method", "effective group rate", "rescue success", "extra rollouts %", "final base success"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for name, r in result.methods.items():
        table.add_row(name, f"{r.effective_group_rate:.3f}", f"{r.rescue_success_rate:.3f}",
                      f"{r.extra_rollout_pct:.1f}", f"{r.final_base_success:.3f}")
    Console().print(table)
    sweep = Table(title="adaptive > same_harness > grpo (effective group rate) as a knob moves")
    sweep.add_column("knob")
    for p in next(iter(result.sweeps.values())):
        sweep.add_column(f"{p.value:g}", justify="center")
    for knob, pts in result.sweeps.items():
        sweep.add_row(knob, *[("holds " if p.ordering_holds else "BREAKS ")
                              + f"{p.effective_group_rate['adaptive'] - p.effective_group_rate['same_harness']:+.3f}"
                              for p in pts])
    Console().print(sweep)
    Console().print(PUBLISHED_NOTE, highlight=False, soft_wrap=True)
    Console().print(f"ordering at these knobs: {'holds' if result.ordering_holds else 'BREAKS'}"
                    + (f"; written to {out}" if out else ""), highlight=False)


@rescue_app.command("pool")
def pool_command(
    pool: Annotated[Path, typer.Argument(help="A pool.toml, or a suite name for its shipped pool.")],
    out: Annotated[Path, typer.Option(help="Folder to write each sibling's bank into.")],
) -> None:
    """Write a pool's siblings as bank folders (each runs under `unscaffold run --harness PATH`)."""
    from unscaffold.rescue.pool import load_pool, materialise, shipped_pool

    try:
        path = pool if pool.suffix == ".toml" else shipped_pool(str(pool))
        loaded = materialise(load_pool(path), out)
    except UnscaffoldError as e:
        fail(e)
    table = Table(title=f"pool {loaded.spec.name} ({loaded.spec.suite})")
    for col in ("sibling", "parent", "repairs", "bank"):
        table.add_column(col)
    for s in loaded.spec.siblings:
        table.add_row(s.name, s.parent, ", ".join(s.repairs), str(loaded.banks[s.name]))
    Console().print(table)


@rescue_app.command("train")
def train_command(
    suite: Annotated[str, typer.Argument(help="Suite to train on.")],
    model: Annotated[str, typer.Option(help="A local checkpoint folder, or `tiny`.")],
    out: Annotated[Path, typer.Option(help="Run folder: metrics.jsonl, adapter/, summary.json, metrics.html.")],
    pool: PoolOption = None,
    router: Annotated[str | None, typer.Option(help="none (plain GRPO), same (re-sample under the base harness), "
                                               "fixed (the pool in order), random, rule or adaptive (default: rule "
                                               "with --validation, else random).")] = None,
    validation: ValidationOption = None,
    profiler: ModelsOption = None,
    voter: VotersOption = None,
    max_steps: Annotated[int, typer.Option(min=1, help="Optimiser steps.")] = 10,
    k: Annotated[int, typer.Option(min=2, help="Rollouts per task, and siblings per rescue.")] = 8,
    tasks_per_step: Annotated[int, typer.Option(min=1, help="Tasks (groups) per generation batch.")] = 4,
    steps_per_generation: Annotated[int, typer.Option(min=1, help="Optimiser steps per generation batch (> 1: "
                                                      "the clip acts).")] = 2,
    num_iterations: Annotated[int, typer.Option(min=1, help="Passes over each generation batch.")] = 1,
    split: Annotated[str | None, typer.Option()] = "train",
    data: DataOption = None,
    split_file: SplitFileOption = None,
    tasks: Annotated[str | None, typer.Option(help="Comma-separated task ids.")] = None,
    opening: Annotated[str | None, typer.Option(help="How an episode starts, as `run --opening` (default: the "
                                                "suite's).")] = None,
    learning_rate: Annotated[float, typer.Option()] = 1e-5,
    max_completion_length: Annotated[int, typer.Option(min=8)] = 256,
    sandbox: Annotated[str, typer.Option(help="local, docker or none.")] = "local",
    use_vllm: Annotated[bool, typer.Option("--use-vllm", help="Generate with vLLM (GPU).")] = False,
    vllm_mode: Annotated[str, typer.Option(help="colocate (server mode is refused).")] = "colocate",
    seed: Annotated[int, typer.Option()] = 42,
    reanchor_every: Annotated[int | None, typer.Option(min=1, help="Steps between re-anchorings of the router "
                                                       "on the current policy's validation runs.")] = None,
    reanchor_tasks: Annotated[str | None, typer.Option(help="Comma-separated validation task ids.")] = None,
    reanchor_split: Annotated[str | None, typer.Option(help="Split of the validation task ids.")] = None,
    reanchor_max_turns: Annotated[int, typer.Option(min=1)] = 10,
    reanchor_max_new_tokens: Annotated[int, typer.Option(min=1, help="Tokens per validation turn.")] = 512,
    no_preflight: NoPreflightOption = False,
) -> None:
    """Rescue GRPO: all-fail groups are re-sampled under router-picked siblings (TRL GRPOTrainer)."""
    from pydantic import ValidationError

    from unscaffold.iojson import validation_error
    from unscaffold.rescue.route import default_router
    from unscaffold.rescue.train import RescueTrainConfig, train

    try:
        try:
            config = RescueTrainConfig(
                suite=suite, model=model, out=out, pool=pool, router=default_router(router, validation),
                validation=validation,
                profilers=profiler or [], voters=voter or [], max_steps=max_steps, k=k, tasks_per_step=tasks_per_step,
                steps_per_generation=steps_per_generation, num_iterations=num_iterations, vllm_mode=vllm_mode,
                split=split, data=data, split_file=split_file, opening=opening,
                task_ids=[t for t in tasks.split(",") if t] if tasks else None, learning_rate=learning_rate,
                max_completion_length=max_completion_length, sandbox=sandbox,
                use_vllm=use_vllm, seed=seed, reanchor_every=reanchor_every,
                reanchor_tasks=[t for t in reanchor_tasks.split(",") if t] if reanchor_tasks else [],
                reanchor_split=reanchor_split, reanchor_max_turns=reanchor_max_turns,
                reanchor_max_new_tokens=reanchor_max_new_tokens)
        except ValidationError as e:
            raise validation_error("options", e) from None
        if not no_preflight:
            from unscaffold.collect.preflight import check_models  # the model path: train's own check

            check_models([*(("--profiler", p) for p in profiler or []), *(("--voter", v) for v in voter or [])],
                         sandbox)
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from unscaffold.rescue.train import world_rank

        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       console=Console(stderr=True), disable=world_rank() > 0)
        job = bar.add_task("rescue GRPO generations", total=-(-max_steps // (steps_per_generation * num_iterations)))

        def step(line: dict) -> None:
            bar.update(job, advance=1, description=f"rescue GRPO generations (effective groups "
                                                   f"{line['effective_group_rate']:.2f})")

        with bar:
            summary = train(config, progress=step)
    except UnscaffoldError as e:
        fail(e)
    if world_rank() > 0:  # under accelerate launch the main process reports
        return
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    table = Table(title=f"rescue GRPO on {suite} ({summary['router']} router)")
    for col in ("step", "effective groups", "GRPO would have", "rescued", "rescue success", "rollouts",
                "extra %", "prefers base"):
        table.add_column(col, justify="right")
    for m in lines:
        table.add_row(str(m["step"]), f"{m['effective_group_rate']:.2f}", f"{m['base_effective_group_rate']:.2f}",
                      str(m["rescued_groups"]), f"{m['rescue_success_rate']:.2f}", str(m["rollouts"]),
                      f"{m['extra_rollout_pct']:.0f}", f"{m['base_preferred_rate']:.2f}")
    Console().print(table)
    for note in summary.get("notes", []):
        Console(stderr=True).print(f"note: {note}", highlight=False)
    Console().print(f"{summary['steps']} steps, effective group rate {summary['effective_group_rate']:.3f} "
                    f"(plain GRPO {summary['base_effective_group_rate']:.3f}), {summary['rescued_groups']} rescued, "
                    f"+{summary['extra_rollout_pct']:.1f}% rollouts; adapter: {out / 'adapter'}; "
                    f"plot: {out / 'metrics.html'}", highlight=False)


@rescue_app.command("route")
def route_command(
    suite: Annotated[str, typer.Argument(help="Suite to run.")],
    student: Annotated[str, typer.Option(help="Model spec or `oracle`.")],
    out: Annotated[Path, typer.Option(help="Run folder: results.json, routing.json, by-harness/NAME runs.")],
    pool: PoolOption = None,
    router: RouterOption = None,
    validation: ValidationOption = None,
    profiler: ModelsOption = None,
    voter: VotersOption = None,
    split: Annotated[str | None, typer.Option()] = None,
    data: DataOption = None,
    split_file: SplitFileOption = None,
    tasks: Annotated[str | None, typer.Option(help="Comma-separated task ids.")] = None,
    trials: Annotated[int, typer.Option(min=1)] = 1,
    concurrency: Annotated[int, typer.Option(min=1)] = 1,
    sandbox: Annotated[str, typer.Option(help="local, docker or none.")] = "local",
    seed: Annotated[int, typer.Option()] = 0,
    no_preflight: NoPreflightOption = False,
) -> None:
    """Rank-1 routing: each task runs under the harness the router ranks first."""
    from unscaffold.collect.models import RunConfig
    from unscaffold.minimal_harness.sandbox.base import sandbox_kind
    from unscaffold.rescue.pool import load_pool, materialise, shipped_pool
    from unscaffold.rescue.route import default_router, run_routed
    from unscaffold.rescue.router_loader import load_router
    from unscaffold.rescue.validation import load_table

    try:
        sandbox_kind(sandbox)
        if not no_preflight:
            from unscaffold.collect.preflight import check_run

            check_run(student, None, sandbox, others=[*(("--profiler", p) for p in profiler or []),
                                                      *(("--voter", v) for v in voter or [])])
        loaded = materialise(load_pool(pool or shipped_pool(suite)), out / "pool")
        table = load_table(validation) if validation else None
        chooser = load_router(default_router(router, validation), loaded.names, table, seed=seed,
                              profilers=profiler, voters=voter)
        config = RunConfig(suite=suite, student=student, out=out, split=split, data=data, split_file=split_file,
                           trials=trials,
                           task_ids=[t for t in tasks.split(",") if t] if tasks else None,
                           concurrency=concurrency, sandbox=sandbox)  # type: ignore[arg-type]
        summary = run_routed(config, loaded, chooser)
    except UnscaffoldError as e:
        fail(e)
    table = Table(title=f"{suite}: rank-1 routing ({summary['router']} router)")
    table.add_column("task")
    table.add_column("harness")
    table.add_column("reward", justify="right")
    for tid, harness in sorted(summary["harness_per_task"].items()):
        table.add_row(tid, harness, f"{summary['per_task'].get(tid, 0.0):.2f}")
    Console().print(table)
    Console().print(f"pass@1 {summary['pass_at_1']:.2f}% over {summary['n_tasks']} tasks; "
                    f"results: {out / 'results.json'}", highlight=False)
    exit_on_problem(summary)


def _results(run: Path) -> Any:
    """A run's results.json, or None where there is none readable (table_from_runs says what is missing)."""
    from unscaffold.collect.models import RunResults
    from unscaffold.errors import InputError
    from unscaffold.iojson import load_model

    try:
        return load_model(run / "results.json", RunResults)
    except InputError:
        return None


@rescue_app.command("validation")
def validation_command(
    suite: Annotated[str, typer.Argument(help="The suite the runs are of.")],
    run: Annotated[list[str], typer.Option(help="HARNESS=RUN_DIR: a run of the validation tasks under `base` or "
                                           "a sibling (repeat the option).")],
    out: Annotated[Path, typer.Option(help="Validation table JSON to write (--validation of train and route).")],
    data: DataOption = None,
    split_file: SplitFileOption = None,
) -> None:
    """Join validation runs (one per harness) into the table the rule and adaptive routers read."""
    from unscaffold.benchmarks import load_suite
    from unscaffold.errors import InputError
    from unscaffold.iojson import write_json_atomic
    from unscaffold.rescue.validation import table_from_runs

    try:
        runs = {}
        for item in run:
            name, sep, path = item.partition("=")
            if not sep or not name or not path:
                raise InputError("--run", None, f"{item!r}: expected HARNESS=RUN_DIR")
            runs[name] = Path(path)
        stalled = next((f"--run {n}={p}: every trial failed for infrastructure ({r.infra_cause}): run it again "
                        "once the cause is fixed" for n, p in runs.items() if (r := _results(p))
                        and r.n_trials and r.outcomes.get("infra_error") == r.n_trials), None)
        if stalled:  # a run that could not run says nothing of its harness: exit 1, as the run itself did
            sys.stderr.write(f"error: {stalled}\n")
            raise typer.Exit(1)
        loaded = load_suite(suite, data, split_file)
        tasks = [t for split in loaded.splits() for t in loaded.tasks(split)]
        table = table_from_runs(runs, {t.id: t.instruction for t in tasks}, {t.id: t.split for t in tasks})
    except UnscaffoldError as e:
        fail(e)
    write_json_atomic(out, table.model_dump(mode="json"))
    Console().print(f"{len(table.tasks)} validation tasks x {len(table.harnesses())} harnesses -> {out}",
                    highlight=False)
