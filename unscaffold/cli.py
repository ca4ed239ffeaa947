"""The `unscaffold` command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from unscaffold.errors import UnscaffoldError

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
console = Console(stderr=True)


def fail(e: Exception) -> None:
    sys.stderr.write(f"error: {e}\n")
    raise typer.Exit(2)


@app.command()
def run(
    suite: Annotated[str, typer.Argument(help="Suite name: harbor, ...")],
    student: Annotated[str, typer.Option(help="Model spec or `oracle`.")],
    out: Annotated[Path, typer.Option(help="Run folder (re-running resumes it).")],
    data: Annotated[Path | None, typer.Option(help="Real data for the suite.")] = None,
    split: Annotated[str | None, typer.Option(help="train or test.")] = None,
    tasks: Annotated[str | None, typer.Option(help="Comma-separated task ids.")] = None,
    trials: Annotated[int, typer.Option(min=1, help="Trials per task.")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Trials at once.")] = 1,
    sandbox: Annotated[str, typer.Option(help="local (bubblewrap), docker, or none (no isolation).")] = "local",
    harness: Annotated[str, typer.Option(help="minimal, hstar (the suite bank) or a bank folder.")] = "minimal",
    reviewer: Annotated[str | None, typer.Option(help="Reviewer: a model spec, replay:FILE, rules, cascade:SPEC, "
                                                 "passthrough. With one, the run is a collection.")] = None,
    knowledge: Annotated[Path | None, typer.Option(help="K for the reviewer (default: the suite's).")] = None,
    budget: Annotated[int, typer.Option(min=0, help="REPLACE decisions allowed per trial.")] = 5,
    reviewer_concurrency: Annotated[int | None, typer.Option(min=1, help="Reviewer calls in flight at once.")] = None,
    infra_retries: Annotated[int, typer.Option(min=0, help="Re-runs of a trial whose machinery failed.")] = 2,
    max_turns: Annotated[int, typer.Option(min=1)] = 40,
    command_timeout: Annotated[float, typer.Option(help="Seconds per command.")] = 60.0,
    max_wall: Annotated[float | None, typer.Option(help="Seconds per trial.")] = None,
    max_cost: Annotated[float | None, typer.Option(help="USD of student tokens per trial.")] = None,
    price_in: Annotated[float, typer.Option(help="USD per million input tokens (for cost).")] = 0.0,
    price_out: Annotated[float, typer.Option(help="USD per million output tokens (for cost).")] = 0.0,
) -> None:
    """Run trials of a suite; without a reviewer this is an evaluation."""
    from unscaffold.collect.models import RunConfig
    from unscaffold.collect.runner import run as run_suite

    try:
        if sandbox not in ("local", "docker", "none"):
            raise UnscaffoldError(f"--sandbox: unknown kind {sandbox!r}; use local, docker or none")
        if sandbox == "none":
            console.print("[yellow]warning: --sandbox none runs model commands on this machine without isolation")
        config = RunConfig(
            suite=suite, student=student, out=out, data=data, split=split,
            task_ids=[t for t in tasks.split(",") if t] if tasks else None, trials=trials,
            concurrency=concurrency, sandbox=sandbox, max_turns=max_turns, command_timeout_s=command_timeout,
            harness=harness, reviewer=reviewer, knowledge=knowledge, budget=budget,
            reviewer_concurrency=reviewer_concurrency, infra_retries=infra_retries, max_wall_s=max_wall,
            max_cost_usd=max_cost, price_in_per_mtok=price_in, price_out_per_mtok=price_out,
        )
        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       console=console, transient=False)
        job = bar.add_task(f"{suite} trials", total=None)

        def started(total: int, done: int) -> None:  # once set-up has passed: no bar before an input error
            bar.update(job, total=total, completed=done)
            bar.start()

        try:
            summary = run_suite(config, progress=lambda r: bar.advance(job), on_start=started)
        finally:
            bar.stop()
    except UnscaffoldError as e:
        fail(e)
    print_summary(summary.model_dump(mode="json"), out)


def print_summary(results: dict, out: Path) -> None:
    """One row per trial (from its result.json), then the run's totals."""
    from unscaffold.collect.models import TrialResult
    from unscaffold.iojson import load_model

    table = Table(title=f"{results['suite']} run", caption=f"student {results['student']}")
    for name, justify in (("trial", "left"), ("reward", "right"), ("turns", "right"), ("replaced", "right"),
                          ("exit", "left"), ("note", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for path in sorted((out / "trials").glob("*/result.json")):
        r = load_model(path, TrialResult)
        note = r.exception or r.reason or ""
        table.add_row(r.trial_id, f"{r.reward:.2f}", str(r.turns), str(r.replacements), r.exit_status, note[:40])
    Console().print(table)
    extra = "".join(f"  {k}={results[k]:.2f}" for k in ("tgc", "sgc") if k in results)
    saved = results.get("reviewer_calls_saved")
    Console().print(
        f"pass@1 {results['pass_at_1']:.2f}% over {results['n_tasks']} tasks / {results['n_trials']} trials{extra}"
        f"  replacements={results['replacements']}  reviewer_calls={results['reviewer_calls']}"
        f"{f'  calls_saved={saved}' if saved else ''}  wall={results['wall_time_s']:.1f}s\n"
        f"results: {out / 'results.json'}",
        highlight=False,
    )


@app.command("exec", context_settings={"allow_interspersed_args": False})
def exec_command(
    command: Annotated[list[str], typer.Argument(help="The command (after --).")],
    network: Annotated[bool, typer.Option("--network", help="Allow network access.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds before the process group is killed.")] = 60.0,
    workspace: Annotated[Path | None, typer.Option(help="Workspace folder (default: a new temporary one).")] = None,
    sandbox: Annotated[str, typer.Option(help="local, docker or none.")] = "local",
) -> None:
    """Run one command as the harness would and print the observation."""
    import shlex
    import tempfile

    from unscaffold.minimal_harness.sandbox import SandboxConfig, open_sandbox

    ws = workspace or Path(tempfile.mkdtemp(prefix="unscaffold-ws-"))
    try:
        if sandbox not in ("local", "docker", "none"):
            raise UnscaffoldError(f"--sandbox: unknown kind {sandbox!r}; use local, docker or none")
        box = open_sandbox(SandboxConfig(kind=sandbox, workspace=ws, network=network, timeout_s=timeout))
        try:
            result = box.execute(command[0] if len(command) == 1 else shlex.join(command))
        finally:
            box.close()
    except UnscaffoldError as e:
        fail(e)
    sys.stdout.write(result.observation() + "\n")
    raise typer.Exit(0 if result.exit_code == 0 else 1)


@app.command("export-atif")
def export_atif(
    run_dir: Annotated[Path, typer.Argument(help="A run folder.")],
    out: Annotated[Path | None, typer.Option(help="Folder for the ATIF files (default: beside each trial).")] = None,
) -> None:
    """Export every trial's trajectory to ATIF v1.7 for Harbor-side tools."""
    from unscaffold.minimal_harness.atif import export_run

    try:
        paths = export_run(run_dir, out)
    except UnscaffoldError as e:
        fail(e)
    Console().print(f"wrote {len(paths)} ATIF trajectories")


@app.command("compile-k")
def compile_k_command(
    bank: Annotated[Path, typer.Argument(help="An h* bank folder (with manifest.toml).")],
    out: Annotated[Path, typer.Option(help="Where to write K (replaced atomically).")],
    sandbox: Annotated[str, typer.Option(help="Sandbox for the recipe checks: local, docker or none.")] = "local",
    verify: Annotated[bool, typer.Option(help="Run each tool and its recipe on the tool's examples.")] = True,
    suite: Annotated[str | None, typer.Option(help="Lint K against this suite's task ids and gold answers.")] = None,
    data: Annotated[Path | None, typer.Option(help="The suite's data, for the lint.")] = None,
) -> None:
    """Compile an h* bank into the reviewer's private reference K."""
    from unscaffold.benchmarks import load_suite
    from unscaffold.knowledge.compiler import compile_k, lint_k
    from unscaffold.knowledge.kfolder import load_k

    try:
        if sandbox not in ("local", "docker", "none"):
            raise UnscaffoldError(f"--sandbox: unknown kind {sandbox!r}; use local, docker or none")
        report = compile_k(bank, out, sandbox=sandbox, verify=verify)
        if suite:
            problems = lint_k(load_k(out), load_suite(suite, data).leak_markers())
            if problems:
                raise UnscaffoldError(f"{out}: K leaks the suite's answers: {problems[0]}"
                                      + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    except UnscaffoldError as e:
        fail(e)
    table = Table(title=f"K from {bank}")
    table.add_column("tool")
    table.add_column("example", justify="right")
    table.add_column("recipe = tool")
    for c in report.recipe_checks:
        table.add_row(c.tool, str(c.example), "yes" if c.same_output and c.same_files else "NO")
    Console().print(table)
    Console().print(f"{report.components} components written to {out}")


@app.command("build-sft")
def build_sft_command(
    run_dirs: Annotated[list[Path], typer.Argument(help="Run folders (collections) to read.")],
    out: Annotated[Path, typer.Option(help="DATA.jsonl to write (DATA.report.json goes beside it).")],
    min_reward: Annotated[float, typer.Option(help="Keep trials with at least this reward.")] = 1.0,
    keep_all: Annotated[bool, typer.Option("--keep-all", help="Keep every trial whatever its reward.")] = False,
    canary: Annotated[list[str] | None, typer.Option(help="A string that must never reach a row.")] = None,
) -> None:
    """Turn reviewed runs into SFT rows: filter, audit, leak-scrub, mask reviewer-voice reasoning."""
    from unscaffold.collect.sft_build import build_sft, report_path

    try:
        report = build_sft(run_dirs, out, min_reward=min_reward, keep_all=keep_all, canaries=canary or [])
    except UnscaffoldError as e:
        fail(e)
    table = Table(title=f"build-sft -> {out}")
    table.add_column("outcome")
    table.add_column("trials", justify="right")
    table.add_row("kept", str(report.kept))
    for reason, count in report.dropped.items():
        table.add_row(f"dropped: {reason}", str(count))
    Console().print(table)
    Console().print(f"{report.kept}/{report.trials} trials kept, {report.masked_reasoning_turns} reasoning turns "
                    f"masked, {report.replacements_kept} replacements kept; report: {report_path(out)}",
                    highlight=False)


# LoRA SFT: inspect-sft, train-sft, merge (unscaffold/sft/cli.py)
from unscaffold.sft.cli import register as _register_sft  # noqa: E402

_register_sft(app)


@app.command("report")
def report_command(
    run_dir: Annotated[Path, typer.Argument(help="A run folder.")],
    out: Annotated[Path | None, typer.Option(help="HTML file to write (default RUN_DIR/report.html).")] = None,
) -> None:
    """Write a self-contained HTML page of a run: summary, plots, per-trial review timelines."""
    from unscaffold.collect.report import write_report

    try:
        path = write_report(run_dir, out)
    except UnscaffoldError as e:
        fail(e)
    Console().print(f"report: {path}", highlight=False)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
