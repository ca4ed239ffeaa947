"""unscaffold: distil an optimized agent harness into model weights (Harness-Zero reviewer distillation, LoRA
SFT) and compare it with sibling-harness rescue RL (Harness-S), from the first trial to the comparison of runs.

A bad option or input is one line on stderr (exit 2); an internal error is one line naming the file that keeps
its traceback (exit 1; --debug prints it)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from unscaffold.cli_exit import CommandGroup, exit_on_problem
from unscaffold.cli_options import (
    DEBUG_HELP,
    VERBOSE_HELP,
    command_from_model,
    on_debug,
    on_verbose,
    setting_argument,
    suite_arguments,
    switch,
)
from unscaffold.command_settings import (
    BehaviorsSettings,
    BuildSftSettings,
    CascadeReportSettings,
    CompareSettings,
    CompileKSettings,
    ExecSettings,
    ExportAtifSettings,
    ImageSettings,
    ReportSettings,
    SplitSettings,
    SuitesSettings,
)
from unscaffold.console import err_console, out_console
from unscaffold.demo import DemoConfig
from unscaffold.errors import UnscaffoldError
from unscaffold.evolve.config import EvolveConfig
from unscaffold.minimal_harness.sandbox.base import sandbox_kind
from unscaffold.outcomes import ERROR_OUTCOMES
from unscaffold.preflight import NO_PREFLIGHT_HELP
from unscaffold.reproduce.command import ReproduceConfig
from unscaffold.rescue.cli import print_routed_run, rescue_app
from unscaffold.run.models import RunConfig
from unscaffold.sft.cli import register as _register_sft
from unscaffold.terminal_text import inert

app = typer.Typer(cls=CommandGroup, add_completion=False, no_args_is_help=True, help=__doc__)


def _print_version(value: bool) -> None:
    if value:
        from unscaffold import __version__

        typer.echo(f"unscaffold {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="Print the version and exit."),
          verbose: bool = typer.Option(False, "--verbose", help=VERBOSE_HELP, callback=on_verbose, is_eager=True),
          debug: bool = typer.Option(False, "--debug", help=DEBUG_HELP, callback=on_debug, is_eager=True)) -> None:
    """unscaffold: distil an optimized agent harness into model weights and compare it with sibling-harness
    rescue RL, from the first trial to the comparison of runs."""


def run_command(config: RunConfig, values: dict[str, Any]) -> None:
    """Run trials of a suite; without a reviewer this is an evaluation."""
    from unscaffold.run.runner import run as run_suite

    if config.sandbox.kind == "none":
        err_console().print("[yellow]warning: --sandbox none runs model commands on this machine without isolation")
    if not values["no_preflight"]:
        from unscaffold.preflight import check_run

        check_run(config.student, config.reviewer, config.sandbox.kind, config.executor)
    if config.harness.kind == "route":
        return print_routed(config)
    if config.router or config.router_validation:
        raise UnscaffoldError("--router: routing needs --harness route:POOL")
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=err_console(), transient=False)
    job = bar.add_task(f"{config.suite} trials", total=None)
    from unscaffold.progress_lines import ProgressLines

    lines = None if err_console().is_terminal else ProgressLines(f"{config.suite} trials")  # a log sees no bar
    finished = [0]

    def started(total: int, done: int) -> None:  # once set-up has passed: no bar before an input error
        bar.update(job, total=total, completed=done)
        finished[0] = done
        if lines is None:
            bar.start()
        else:
            lines.update(done, total=total)

    def advance(_: Any) -> None:
        bar.advance(job)
        finished[0] += 1
        if lines is not None:
            lines.update(finished[0])

    try:
        summary = run_suite(config, progress=advance, on_start=started)
    finally:
        if bar.live.is_started:  # stopping a bar never shown prints a blank line before the error
            bar.stop()
    results = summary.model_dump(mode="json")
    print_summary(results, config.out)
    exit_on_problem(results)


# `unscaffold run`: every option is a RunConfig field (flag, help and default declared there once).
app.command("run")(command_from_model(RunConfig, "run", suite_arguments(RunConfig), run_command))


def print_routed(config: RunConfig) -> None:
    """Rank-1 routing: each task under the harness the router ranks first; the table says which."""
    from unscaffold.rescue.route import run_route_spec

    print_routed_run(config.suite, run_route_spec(config), config.out)


def print_summary(results: dict, out: Path) -> None:
    """One row per trial (from its result.json), the trials whose environment or verifier failed apart
    from those the student failed, the skipped tasks, then the run's totals."""
    from unscaffold.run.folder import RunFolder

    table = Table(title=inert(f"{results['suite']} run"), caption=inert(f"student {results['student']}"))
    for name, justify in (("trial", "left"), ("reward", "right"), ("turns", "right"), ("replaced", "right"),
                          ("outcome", "left"), ("note", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    not_student, approximate = [], []
    for r in RunFolder(out).read_trial_results():
        note = r.reason or r.exception or ""
        if r.environment_notes and r.outcome not in ERROR_OUTCOMES:
            approximate.append(r)
        table.add_row(inert(r.trial_id), f"{r.reward:.2f}", str(r.turns), str(r.replacements), inert(r.outcome),
                      inert(note[:40]))
        if r.outcome in ERROR_OUTCOMES:
            not_student.append(r)
    out_console().print(table)
    if not_student:
        failed = Table(title="not the student's failures: the environment, verifier or machinery failed")
        for name in ("trial", "outcome", "reason"):
            failed.add_column(name, overflow="fold")
        for r in not_student:
            failed.add_row(inert(r.trial_id), inert(r.outcome), inert(r.reason))
        out_console().print(failed)
    for r in approximate:
        out_console().print(inert(f"{r.trial_id} {r.outcome}, with lines of its environment not applied: "
                              f"{'; '.join(r.environment_notes)} (--sandbox docker builds the task's image)"),
                            highlight=False)
    for task_id, why in sorted((results.get("skipped_tasks") or {}).items()):
        out_console().print(inert(f"skipped task {task_id}: {why}"), highlight=False)
    extra = "".join(f"  {k}={results[k]:.2f}" for k in ("tgc", "sgc") if k in results)
    saved = results.get("reviewer_calls_saved")
    out_console().print(
        f"pass@1 {results['pass_at_1']:.2f}% over {results['n_tasks']} tasks / {results['n_trials']} trials{extra}"
        f"  replacements={results['replacements']}  reviewer_calls={results['reviewer_calls']}"
        f"{f'  calls_saved={saved}' if saved else ''}  wall={results['wall_time_s']:.1f}s\n"
        f"results: {RunFolder(out).results}",
        highlight=False,
    )


def exec_command(s: ExecSettings, values: dict[str, Any]) -> None:
    """Run one command as the harness would and print the observation."""
    command, network, timeout, workspace, sandbox = s.command, s.network, s.timeout, s.workspace, s.sandbox
    import shlex
    import shutil
    import tempfile

    from unscaffold.minimal_harness.sandbox import SandboxConfig, open_sandbox

    kind = sandbox_kind(sandbox)
    ws = workspace or Path(tempfile.mkdtemp(prefix="unscaffold-ws-"))
    try:
        box = open_sandbox(SandboxConfig(kind=kind, workspace=ws, network=network, timeout_s=timeout))
        try:
            result = box.execute(command[0] if len(command) == 1 else shlex.join(command))
        finally:
            box.close()
    finally:
        if workspace is None:
            shutil.rmtree(ws, ignore_errors=True)
    sys.stdout.write(result.observation() + "\n")
    raise typer.Exit(0 if result.exit_code == 0 else 1)


app.command("exec", context_settings={"allow_interspersed_args": False})(command_from_model(
    ExecSettings, "exec", [setting_argument(ExecSettings, "command", list[str])], exec_command))


image_app = typer.Typer(no_args_is_help=True, help="Images for `--sandbox docker` built without an image registry: "
                        "base (Debian from the machine's mirror) and suites (the suites' libraries on top).")
app.add_typer(image_app, name="image")


def _image_command(suites: bool, mirror: str | None, suite: str | None) -> None:
    from unscaffold.minimal_harness.sandbox.docker_sandbox import connect
    from unscaffold.offline import images

    client = connect()
    tag = images.build_base(client, images.base_recipe(mirror, suite), say=err_console().print)
    if suites:
        tag = images.build_suites(client, tag, say=err_console().print)
    sys.stdout.write(tag + "\n")


def image_base_command(s: ImageSettings, values: dict[str, Any]) -> None:
    """Build the base image from the Debian mirror (debootstrap, then import) unless built; print its tag."""
    _image_command(False, s.mirror, s.suite)


image_app.command("base")(command_from_model(ImageSettings, "image base", [], image_base_command))


def image_suites_command(s: ImageSettings, values: dict[str, Any]) -> None:
    """Build the suites' image (Python and the suites' libraries) on the base unless built; print its tag."""
    _image_command(True, s.mirror, s.suite)


image_app.command("suites")(command_from_model(ImageSettings, "image suites", [], image_suites_command))


def export_atif(s: ExportAtifSettings, values: dict[str, Any]) -> None:
    """Export every trial's trajectory to ATIF v1.7 for Harbor-side tools."""
    from unscaffold.minimal_harness.atif import export_run
    from unscaffold.run.folder import RunFolder

    paths = export_run(RunFolder(s.run_dir), s.out)
    out_console().print(f"wrote {len(paths)} ATIF trajectories")


app.command("export-atif")(command_from_model(
    ExportAtifSettings, "export-atif", [setting_argument(ExportAtifSettings, "run_dir", Path)], export_atif))


def compile_k_command(s: CompileKSettings, values: dict[str, Any]) -> None:
    """Compile an h* bank into the reviewer's private reference K."""
    bank, out, sandbox, verify, suite, data = s.bank, s.out, s.sandbox, s.verify, s.suite, s.data
    from unscaffold.benchmarks import load_suite
    from unscaffold.knowledge.compiler import compile_k, lint_k
    from unscaffold.knowledge.kfolder import load_k

    report = compile_k(bank, out, sandbox=sandbox_kind(sandbox), verify=verify)
    if suite:
        with load_suite(suite, data) as loaded:
            problems = lint_k(load_k(out), loaded.leak_markers())
        if problems:
            raise UnscaffoldError(f"{out}: K leaks the suite's answers: {problems[0]}"
                                  + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    table = Table(title=f"K from {bank}")
    table.add_column("tool")
    table.add_column("example", justify="right")
    table.add_column("recipe = tool")
    for c in report.recipe_checks:
        table.add_row(c.tool, str(c.example), "yes" if c.same_output and c.same_files else "NO")
    out_console().print(table)
    out_console().print(f"{report.components} components written to {out}")


app.command("compile-k")(command_from_model(
    CompileKSettings, "compile-k", [setting_argument(CompileKSettings, "bank", Path)], compile_k_command))


BUILD_SFT_DROPS_SHOWN = 20  # dropped trials printed (all of them with --keep-all); the report lists every one


def build_sft_command(s: BuildSftSettings, values: dict[str, Any]) -> None:
    """Turn reviewed runs into SFT rows: filter, audit, leak-scrub, mask reviewer-voice reasoning."""
    run_dirs, out, min_reward, keep_all, canary = s.run_dirs, s.out, s.min_reward, s.keep_all, s.canary
    from unscaffold.sft.build import build_sft, report_path

    report = build_sft(run_dirs, out, min_reward=min_reward, keep_all=keep_all, audits=s.audit,
                       include_hstar=s.include_hstar, canaries=canary or [])
    table = Table(title=f"build-sft -> {out}")
    table.add_column("outcome")
    table.add_column("trials", justify="right")
    table.add_row("kept", str(report.kept))
    for source, count in report.sources.items():
        table.add_row(f"kept, source {source}", str(count))
    for reason, count in report.dropped.items():
        table.add_row(f"dropped: {reason}", str(count))
    out_console().print(table)
    shown = report.drops if keep_all else report.drops[:BUILD_SFT_DROPS_SHOWN]
    for drop in shown:  # every trial not kept names itself; a leak shows its marker in the row around it
        where = f" {drop.marker!r} in ...{drop.context}..." if drop.marker else ""
        out_console().print(f"dropped {drop.trial_id}: {drop.reason}{where}", highlight=False, markup=False)
    if len(report.drops) > len(shown):
        out_console().print(f"... {len(report.drops) - len(shown)} more dropped trials in {report_path(out)}",
                            highlight=False)
    audits = f"extra audits: {', '.join(report.audits)}" if report.audits else "no extra audits"
    out_console().print(f"{report.kept}/{report.trials} trials kept ({audits}), {report.masked_reasoning_turns} "
                        f"reasoning turns masked, {report.untrained_turns} malformed turns kept as context, "
                        f"{report.replacements_kept} replacements kept; report: {report_path(out)}", highlight=False)


app.command("build-sft")(command_from_model(
    BuildSftSettings, "build-sft", [setting_argument(BuildSftSettings, "run_dirs", list[Path])], build_sft_command))

# LoRA SFT: inspect-sft, train-sft, merge (unscaffold/sft/cli.py)
_register_sft(app)


def suites_command(s: SuitesSettings, values: dict[str, Any]) -> None:
    """List the suites this installation finds: each folder that declares itself in a suite.toml."""
    import json
    import os

    from unscaffold.behaviors.terminal import print_grid
    from unscaffold.errors import InputError
    from unscaffold.suites import SEARCH_PATH, entries

    if s.search is not None:
        if not s.search.is_dir():
            raise InputError("--search", None, f"{s.search} is not a folder")
        os.environ[SEARCH_PATH] = os.pathsep.join(p for p in (str(s.search), os.environ.get(SEARCH_PATH)) if p)
    listed = [entry.listing() for entry in entries()]
    if s.as_json:
        sys.stdout.write(json.dumps([row.model_dump() for row in listed], indent=2) + "\n")
        return
    rows = [[row.name + (f" ({', '.join(row.aliases)})" if row.aliases else ""),
             "built in" if row.built_in else row.folder, ", ".join(row.parts), row.description] for row in listed]
    print_grid(out_console(), "Suites: each a folder with a suite.toml (UNSCAFFOLD_SUITE_PATH adds folders).",
               (["suite", "from", "parts", "what it is"], rows), numeric_from=4)


app.command("suites")(command_from_model(SuitesSettings, "suites", [], suites_command))


def report_command(s: ReportSettings, values: dict[str, Any]) -> None:
    """Write a self-contained HTML page of a run: summary, plots, per-trial review timelines."""
    from unscaffold.run.report import write_report

    path = write_report(s.run_dir, s.out)
    out_console().print(f"report: {path}", highlight=False)


app.command("report")(command_from_model(
    ReportSettings, "report", [setting_argument(ReportSettings, "run_dir", Path)], report_command))

# ---- behaviour recovery and the comparison of runs ------------------------------------------------------


def behaviors_command(s: BehaviorsSettings, values: dict[str, Any]) -> None:
    """Behaviour recovery: eligible tasks show a behaviour under h* and not under h; rate = tuned shows it.
    Runs of several suites (one of each role per suite) give per-suite means and the pooled mean."""
    base_h, base_hstar, tuned, min_eligible, rule = s.base_h, s.base_hstar, s.tuned, s.min_eligible, s.rule
    bank, taught, as_json, out = s.bank, s.taught, s.as_json, s.out
    from unscaffold.behaviors.html import recovery_page
    from unscaffold.behaviors.recovery import (
        PooledRecovery,
        RecoveryTable,
        bank_detectors,
        by_suite,
        pooled,
        recovery_table,
    )
    from unscaffold.behaviors.runs import load_run
    from unscaffold.behaviors.taught import taught_counts
    from unscaffold.behaviors.terminal import emit, print_pooled, print_recovery, trial_rule

    chosen = trial_rule(rule)
    groups = by_suite([load_run(r) for r in base_h], [load_run(r) for r in base_hstar],
                      [load_run(r) for r in tuned])
    if bank is not None and len(groups) > 1:
        raise UnscaffoldError(f"--bank {bank}: one bank cannot serve {len(groups)} suites; leave --bank out so "
                              "each suite uses the bank its base + h* run used")
    rows = None
    if taught is not None:
        if len(groups) > 1:
            raise UnscaffoldError(f"--taught {taught}: one set of training rows per suite; give one suite")
        rows = taught_counts(taught, bank_detectors(groups[0][1], bank)[1])
    tables = [recovery_table(*group, rule=chosen, min_eligible=min_eligible, bank=bank, taught=rows)
              for group in groups]
    several = pooled(tables) if len(tables) > 1 else None
    result: RecoveryTable | PooledRecovery = tables[0] if several is None else several
    show = (lambda: print_recovery(tables[0])) if several is None else (lambda: print_pooled(several))
    emit(result, lambda: recovery_page(result), out, as_json, show)


app.command("behaviors")(command_from_model(BehaviorsSettings, "behaviors", [], behaviors_command))


def compare_command(s: CompareSettings, values: dict[str, Any]) -> None:
    """Compare runs: scores with bootstrap intervals, paired differences, behaviour recovery, cost."""
    runs, baseline, seed, min_eligible, rule = s.runs, s.baseline, s.seed, s.min_eligible, s.rule
    bank, taught, as_json, out = s.bank, s.taught, s.as_json, s.out
    from unscaffold.behaviors.compare import compare
    from unscaffold.behaviors.html import comparison_page
    from unscaffold.behaviors.recovery import bank_detectors
    from unscaffold.behaviors.runs import load_run
    from unscaffold.behaviors.taught import taught_counts
    from unscaffold.behaviors.terminal import emit, print_comparison, trial_rule

    loaded = [load_run(r) for r in runs]
    rows = None
    if taught is not None:
        hstar = [r for r in loaded if r.results.harness == "hstar" and not r.results.reviewer]
        if not hstar:
            raise UnscaffoldError(f"--taught {taught}: no base + h* run names the bank to count behaviours with")
        rows = taught_counts(taught, bank_detectors(hstar[0], bank)[1])
    result = compare(loaded, baseline=baseline, seed=seed, rule=trial_rule(rule),
                     min_eligible=min_eligible, bank=bank, taught=rows)
    emit(result, lambda: comparison_page(result), out, as_json, lambda: print_comparison(result))


app.command("compare")(command_from_model(
    CompareSettings, "compare", [setting_argument(CompareSettings, "runs", list[Path])], compare_command))


def cascade_report_command(s: CascadeReportSettings, values: dict[str, Any]) -> None:
    """What the cascade reviewer would save on these runs, and which REPLACE decisions it would let through."""
    runs, as_json, out = s.runs, s.as_json, s.out
    import json

    from unscaffold.iojson import write_text_atomic
    from unscaffold.reviewer.cascade_report import print_whatif, whatif_page
    from unscaffold.reviewer.cascade_whatif import cascade_whatif

    result = cascade_whatif(runs)
    if out:
        write_text_atomic(out, whatif_page(result))
    if as_json:
        sys.stdout.write(json.dumps({**result.model_dump(mode="json"), "summary": result.summary()}, indent=2) + "\n")
    else:
        print_whatif(result)


app.command("cascade-report")(command_from_model(CascadeReportSettings, "cascade-report", [
    setting_argument(CascadeReportSettings, "runs", list[Path])], cascade_report_command))


app.add_typer(rescue_app, name="rescue")

# ---- harness evolution ----------------------------------------------------------------------------------


def evolve_command(config: EvolveConfig, values: dict[str, Any]) -> None:
    """Evolve an h* bank from failures on the train split: one shared h* or a frozen sibling pool."""
    from unscaffold.evolve.run import evolve
    from unscaffold.evolve.tables import print_report

    if config.single and config.pool is not None:
        raise UnscaffoldError("--single and --pool exclude each other")
    if not values["no_preflight"]:
        from unscaffold.preflight import check_models

        check_models([("--student", config.student), ("--editor", config.editor),
                      ("--analyst", config.analyst)], config.sandbox)
    with err_console().status("evolving (run folders and exchanges under --out)") as status:
        report = evolve(config, lambda step: status.update(f"evolving: {step}"))
    print_report(report, out_console())
    out_console().print(f"rounds: {config.out / 'rounds.json'}", highlight=False)


app.command("evolve")(command_from_model(EvolveConfig, "evolve", suite_arguments(EvolveConfig), evolve_command))


def split_command(s: SplitSettings, values: dict[str, Any]) -> None:
    """A seeded split of a real data folder into train, validation and test ids (for --split-file)."""
    folder, sizes, out, seed, suite = s.folder, s.sizes, s.out, s.seed, s.suite
    from unscaffold.benchmarks import load_suite
    from unscaffold.benchmarks.splits import guess_suite, parse_sizes, seeded_split
    from unscaffold.iojson import write_json_atomic

    wanted = parse_sizes(sizes)
    name = suite or guess_suite(folder)
    with load_suite(name, folder) as loaded:
        ids = [t.id for split in loaded.splits() for t in loaded.tasks(split)]
    split_file = seeded_split(ids, wanted, seed)
    write_json_atomic(out, split_file.model_dump(mode="json"))
    counts = ", ".join(f"{k} {v}" for k, v in split_file.sizes().items())
    out_console().print(f"{name}: {len(set(ids))} tasks -> {counts}; {out}", highlight=False)


app.command("split")(command_from_model(
    SplitSettings, "split", [setting_argument(SplitSettings, "folder", Path)], split_command))

# ---- the whole pipeline, offline -------------------------------------------------------------------------


def demo_command(config: DemoConfig, values: dict[str, Any]) -> None:
    """The whole pipeline offline: K, evaluations under h and h*, reviewed collection, SFT, tuned evaluation,
    behaviour recovery, rescue RL, comparison and reports."""
    from unscaffold.demo import PLUMBING, REAL, TINY, Demo
    from unscaffold.run.folder import RunFolder

    if config.shipped():
        err_console().print("Using the shipped recorded students and reviewer (examples/replay/demo_*.json) and "
                            "the built-in tiny model: offline, a few minutes on two cores.", highlight=False)
    if not values["no_preflight"]:
        from unscaffold.preflight import check_models, check_training

        check_models([("--student", config.student), ("--hstar-student", config.hstar_student),
                      ("--reviewer", config.reviewer)], "local")
        check_training(config.model)
    demo = Demo(config, console=out_console())
    try:
        demo.run()
    except UnscaffoldError:
        demo.summary()  # the steps that finished, then the one line of the error
        raise
    demo.summary()
    if config.model == TINY:
        demo.settings()
        out_console().print(PLUMBING, style="yellow", highlight=False)
    out_console().print(REAL, highlight=False, soft_wrap=True)
    out = config.out
    out_console().print(f"reports: {out / 'compare.html'}  {out / 'behaviors.html'}  "
                        f"{RunFolder(out / 'collect').report}", highlight=False)


app.command("demo")(command_from_model(DemoConfig, "demo", [
    switch("no_preflight", "--no-preflight", NO_PREFLIGHT_HELP),
], demo_command))


# ---- a published table as one resumable plan ----------------------------------------------------------


def reproduce_command(config: ReproduceConfig, values: dict[str, Any]) -> None:
    """A published table as one resumable plan: every stage's command, skipped when finished and unchanged,
    and the table with each cell labelled measured or published."""
    from unscaffold.reproduce.command import reproduce

    reproduce(config, out_console())


app.command("reproduce")(command_from_model(ReproduceConfig, "reproduce", [
    setting_argument(ReproduceConfig, "recipe", str)], reproduce_command))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
