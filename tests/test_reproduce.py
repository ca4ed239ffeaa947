"""`unscaffold reproduce`: plans, resumption and the table's labels."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from unscaffold.cli import app
from unscaffold.errors import InputError, UnscaffoldError
from unscaffold.reproduce import published
from unscaffold.reproduce.command import ReproduceConfig, prepare
from unscaffold.reproduce.execute import StageFailed, execute
from unscaffold.reproduce.plan import Plan, Stage, load_plan, plan_toml, write_plan
from unscaffold.reproduce.recipes import Models, Sources, build_plan

ROOT = Path(__file__).resolve().parent.parent


def _plan(**changes: object) -> Plan:
    stages = [Stage(name="a", argv=["x", "{dir}/a"], out="a"),
              Stage(name="b", argv=["y", "{dir}/a", "{dir}/b"], out="b", after=["a"]),
              Stage(name="c", argv=["z"], out="c.json", stdout=True)]
    data = {"recipe": "harness-zero", "suite": "retrosynthesis", "scale": "mini", "model": "tiny-wide",
            "train": ["t1", "t2"], "test": ["t3"], "stages": stages, **changes}
    return Plan.model_validate(data)


class Recorder:
    """A stand-in for the child process: writes the stage's output and remembers what ran."""

    def __init__(self, fail: str | None = None) -> None:
        self.ran: list[str] = []
        self.fail = fail

    def __call__(self, stage: Stage, folder: Path) -> int:
        self.ran.append(stage.name)
        if stage.name == self.fail:
            (folder / stage.out).mkdir(parents=True, exist_ok=True)  # a partial output
            return 2
        out = folder / stage.out
        if stage.stdout:
            out.write_text("{}")
        else:
            out.mkdir(parents=True, exist_ok=True)
            (out / "done").write_text(" ".join(stage.command(folder)))
        return 0


def _quiet() -> Console:
    return Console(file=open("/dev/null", "w"))


def test_the_plan_file_round_trips_and_names_every_stage(tmp_path: Path) -> None:
    plan = build_plan("harness-zero", "retrosynthesis", "mini", Models(), 1)
    write_plan(plan, tmp_path / "plan.toml")
    assert load_plan(tmp_path / "plan.toml") == plan
    assert [s.name for s in plan.stages] == ["compile-k", "base-h", "base-hstar", "collect-b5", "build-sft-b5",
                                             "train-sft-b5", "tuned-b5", "behaviors", "compare"]
    assert plan.estimate().model_dump() == {"rollouts": 26, "reviewer_calls": 40, "training_steps": 400}
    hs = build_plan("harness-s", "retrosynthesis", "mini", Models(), 1)
    assert [s.name for s in hs.stages] == ["base-h", "rescue-none", "eval-none", "rescue-same", "eval-same",
                                           "rescue-random", "eval-random", "routed"]
    assert hs.model == plan.model and hs.test == plan.test and hs.train == plan.train


def test_the_paper_scale_collects_at_the_three_published_budgets() -> None:
    plan = build_plan("harness-zero", "retrosynthesis", "paper", Models(model="Qwen/Qwen3-8B",
                                                                         reviewer="anthropic:claude"), 1)
    collects = [s for s in plan.stages if s.name.startswith("collect-b")]
    assert [s.argv[s.argv.index("--budget") + 1] for s in collects] == ["5", "3", "1"]
    assert plan.stage("behaviors").argv[plan.stage("behaviors").argv.index("--min-eligible") + 1] == "10"


WORDS = ROOT / "examples" / "harbor_words"
WORDS_SOURCES = Sources(data=WORDS, split_file=WORDS / "split.json", bank=ROOT / "examples" / "hstar" / "words_bank")


def _after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_the_real_model_on_harbor_data_gets_its_settings_data_split_and_bank() -> None:
    plan = build_plan("harness-zero", "harbor", "mini", Models(model="smollm2-135m", reviewer="rules"), 1,
                      WORDS_SOURCES)
    assert plan.train[:2] == ["word-fruit", "word-color"] and len(plan.train) == 10
    assert plan.test == ["word-fish", "word-flower", "word-spice", "word-cloud", "word-stone", "word-drink"]
    data, split = str(WORDS.resolve()), str((WORDS / "split.json").resolve())
    for name in ("base-h", "base-hstar", "collect-b5", "tuned-b5"):
        argv = plan.stage(name).argv
        assert (_after(argv, "--data"), _after(argv, "--split-file"), _after(argv, "--max-turns")) == (data, split, "2")
    assert _after(plan.stage("base-h").argv, "--student") == "hf:smollm2-135m?max_new_tokens=128"
    assert _after(plan.stage("tuned-b5").argv, "--student") == "hf:smollm2-135m+{dir}/adapter-b5?max_new_tokens=128"
    assert _after(plan.stage("base-hstar").argv, "--harness") == str(WORDS_SOURCES.bank.resolve())  # type: ignore[union-attr]
    assert plan.stage("compile-k").argv[:2] == ["compile-k", str(WORDS_SOURCES.bank.resolve())]  # type: ignore[union-attr]
    assert _after(plan.stage("compile-k").argv, "--data") == data
    train = plan.stage("train-sft-b5").argv
    assert (_after(train, "--model"), _after(train, "--learning-rate"), _after(train, "--max-steps")) == (
        "smollm2-135m", "5e-4", "20")
    assert plan.estimate().model_dump() == {"rollouts": 28, "reviewer_calls": 50, "training_steps": 20}
    assert plan.stage("compare").argv == ["compare", "{dir}/base-h", "{dir}/base-hstar", "{dir}/tuned-b5", "--out",
                                          "{dir}/compare.html"]


def test_a_trained_spec_keeps_the_students_generation_limit() -> None:
    models = Models(model="smollm2-135m", student="hf:smollm2-135m?max_new_tokens=64", reviewer="rules")
    plan = build_plan("harness-zero", "harbor", "mini", models, 1, WORDS_SOURCES)
    assert _after(plan.stage("tuned-b5").argv, "--student") == "hf:smollm2-135m+{dir}/adapter-b5?max_new_tokens=64"
    other = Models(model="smollm2-135m", student="openai:m?x=1@http://localhost:8000/v1", reviewer="rules")
    plan = build_plan("harness-zero", "harbor", "mini", other, 1, WORDS_SOURCES)  # only an hf: spec lends its limit
    assert _after(plan.stage("tuned-b5").argv, "--student") == "hf:smollm2-135m+{dir}/adapter-b5?max_new_tokens=128"


def test_a_plan_with_a_task_in_train_and_test_is_refused(tmp_path: Path) -> None:
    bad = plan_toml(_plan()).replace('test = ["t3"]', 'test = ["t2", "t3"]')
    (tmp_path / "plan.toml").write_text(bad)
    with pytest.raises(InputError) as err:
        load_plan(tmp_path / "plan.toml")
    assert str(err.value) == (f"{tmp_path / 'plan.toml'}: Value error, task 't2' is in both train and test "
                              "(1 shared)")


def test_a_finished_stage_is_skipped_a_changed_one_reruns_with_what_reads_it(tmp_path: Path) -> None:
    plan = _plan()
    first = Recorder()
    execute(plan, tmp_path, console=_quiet(), run=first)
    assert first.ran == ["a", "b", "c"]
    again = Recorder()
    runs = execute(plan, tmp_path, console=_quiet(), run=again)
    assert again.ran == [] and [r.status for r in runs] == ["skipped"] * 3
    edited = plan.model_copy(update={"stages": [plan.stages[0].model_copy(update={"argv": ["x2", "{dir}/a"]}),
                                                *plan.stages[1:]]})
    third = Recorder()
    execute(edited, tmp_path, console=_quiet(), run=third)
    assert third.ran == ["a", "b"]  # c reads nothing of a
    forced = Recorder()
    execute(edited, tmp_path, start="b", console=_quiet(), run=forced)
    assert forced.ran == ["b", "c"]


def test_a_failed_stage_keeps_the_finished_ones_and_restarts_clean(tmp_path: Path) -> None:
    plan = _plan()
    with pytest.raises(StageFailed) as err:
        execute(plan, tmp_path, console=_quiet(), run=Recorder(fail="b"))
    assert str(err.value) == f"stage b: `unscaffold y {tmp_path}/a {tmp_path}/b` failed with exit code 2"
    assert err.value.exit_code == 2
    retry = Recorder()
    execute(plan, tmp_path, console=_quiet(), run=retry)
    assert retry.ran == ["b", "c"]
    assert (tmp_path / "b" / "done").read_text() == f"y {tmp_path}/a {tmp_path}/b"


def test_a_run_stage_resumes_into_its_unfinished_output(tmp_path: Path) -> None:
    plan = _plan(stages=[Stage(name="a", argv=["run"], out="a", resumes=True)])
    (tmp_path / "a" / "trials" / "t1").mkdir(parents=True)  # a trial that finished before a kill
    execute(plan, tmp_path, console=_quiet(), run=Recorder())
    assert (tmp_path / "a" / "trials" / "t1").is_dir()


def test_from_names_a_stage_of_the_plan(tmp_path: Path) -> None:
    with pytest.raises(UnscaffoldError) as err:
        execute(_plan(), tmp_path, start="nope", console=_quiet(), run=Recorder())
    assert str(err.value) == "--from: no stage 'nope' in the plan (stages: a, b, c)"


def test_two_recipes_of_one_folder_share_base_model_and_split(tmp_path: Path) -> None:
    prepare(ReproduceConfig(recipe="harness-zero", suite="retrosynthesis", out=tmp_path))
    other = build_plan("harness-s", "retrosynthesis", "mini", Models(), 1).model_copy(update={"model": "tiny"})
    write_plan(other, tmp_path / "elsewhere.toml")
    with pytest.raises(UnscaffoldError) as err:
        prepare(ReproduceConfig(recipe="harness-s", suite="retrosynthesis", out=tmp_path,
                                plan=tmp_path / "elsewhere.toml"))
    assert str(err.value) == (f"{tmp_path}/harness-zero/plan.toml: base model 'tiny-wide' differs from harness-s's "
                              "'tiny'; both recipes must train one base model")
    swapped = other.model_copy(update={"model": "tiny-wide", "train": other.test, "test": other.train})
    write_plan(swapped, tmp_path / "swapped.toml")
    with pytest.raises(UnscaffoldError) as err:
        prepare(ReproduceConfig(recipe="harness-s", suite="retrosynthesis", out=tmp_path,
                                plan=tmp_path / "swapped.toml"))
    assert str(err.value).startswith(f"{tmp_path}/harness-zero/plan.toml: task 'rxn-00")
    assert "is a train task of one recipe and a test task of the other" in str(err.value)
    assert not (tmp_path / "harness-s").exists()


def test_the_cli_refuses_an_unknown_recipe_and_a_changed_setting_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["reproduce", "harness-x", "--suite", "retrosynthesis", "--out", str(tmp_path)])
    assert (result.exit_code, result.output) == (2, "error: RECIPE: unknown recipe 'harness-x'; expected "
                                                    "harness-zero or harness-s; did you mean harness-s?\n")
    ok = CliRunner().invoke(app, ["reproduce", "harness-zero", "--suite", "retrosynthesis", "--out", str(tmp_path),
                                  "--dry-run"])
    assert ok.exit_code == 0 and "collect-b5: unscaffold run retrosynthesis" in ok.output
    result = CliRunner().invoke(app, ["reproduce", "harness-zero", "--suite", "retrosynthesis", "--out",
                                      str(tmp_path), "--eval-trials", "3", "--dry-run"])
    assert (result.exit_code, result.output) == (2, f"error: {tmp_path}/harness-zero/plan.toml: eval_trials 1 "
                                                    "differs from the flags' 3; pass another --out, or --plan with "
                                                    "an edited copy\n")


def test_every_published_figure_is_the_one_docs_recipes_states() -> None:
    text = (ROOT / "docs" / "recipes.md").read_text()
    figures = [v for row in published.HARNESS_ZERO.values() for v in row.values()]
    figures += [published.RECOVERY_POOLED_MEAN, *published.HARNESS_S_AVG3.values(),
                *published.HARNESS_S_EFFECTIVE.values(), *(v for v in published.HARNESS_S_EXTRA_ROLLOUTS.values() if v)]
    numbers = set(re.findall(r"\d+\.\d+", text))
    assert [f for f in figures if f"{f:.2f}".rstrip("0").rstrip(".") not in {n.rstrip("0").rstrip(".") for n in
                                                                             numbers}] == []


def test_published_harness_s_figures_show_only_beside_appworld() -> None:
    assert published.harness_s_cell(published.HARNESS_S_AVG3, "GRPO", "retrosynthesis") is None
    cell = published.harness_s_cell(published.HARNESS_S_AVG3, "GRPO", "appworld_lite")
    assert cell is not None and cell.value == 48.98 and cell.source == published.HS_SOURCE


def test_a_stage_rerun_with_the_same_command_reruns_what_reads_it(tmp_path: Path) -> None:
    from unscaffold.reproduce.state import State

    plan = _plan()
    execute(plan, tmp_path, console=_quiet(), run=Recorder())
    state = State.load(tmp_path)
    del state.stages["a"]  # as after a kill while `a` was rerunning
    state.save(tmp_path)
    again = Recorder()
    execute(plan, tmp_path, console=_quiet(), run=again)
    assert again.ran == ["a", "b"]


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["harness-zero", "harness-s"])
def test_the_mini_scale_runs_offline_and_a_second_run_skips_every_stage(recipe: str, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    argv = [sys.executable, "-m", "unscaffold.cli", "reproduce", recipe, "--suite", "retrosynthesis", "--out",
            str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    table = json.loads((tmp_path / recipe / "table.json").read_text())
    rows = {r["label"]: r for r in table["rows"]}
    if recipe == "harness-zero":
        assert list(rows) == ["base + h", "base + h*", "distilled + h (budget 5)", "behaviour recovery"]
        assert (rows["base + h"]["measured"]["value"], rows["base + h*"]["measured"]["value"]) == (50.0, 100.0)
        assert [rows[r]["published"]["value"] for r in ("base + h", "base + h*", "distilled + h (budget 5)")] == [
            12.0, 38.0, 30.0]
        cost = rows["distilled + h (budget 5)"]["cost"]
        assert (cost["rollouts"], cost["training_steps"]) == (8, 400) and cost["reviewer_calls"] > 0
    else:
        assert list(rows) == ["base model + h", "GRPO", "same-harness rescue", "Harness-S (router random)",
                              "Harness-S + rank-1 routing"]
        assert all(r["published"] is None for r in rows.values())  # AppWorld figures: not beside retrosynthesis
        assert rows["GRPO"]["cost"]["training_steps"] == 2
    assert all(r["measured"] is not None for r in rows.values())
    again = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0
    stages = len(json.loads((tmp_path / recipe / "state.json").read_text())["stages"])
    assert " ".join(again.stdout.split()).count("inputs and command unchanged: skipped") == stages


def test_the_paper_plan_runs_the_data_source_ablation_where_it_was_published() -> None:
    models = Models(model="Qwen/Qwen3-8B", reviewer="anthropic:claude")
    plan = build_plan("harness-zero", "retrosynthesis", "paper", models, 1)
    ablation = [s.name for s in plan.stages if "-abl-" in s.name]
    assert ablation == [f"{step}-abl-{name}" for name in ("empty-k", "gold", "hstar")
                        for step in ("collect", "build-sft", "train-sft", "tuned")]
    assert "--empty-k" in plan.stage("collect-abl-empty-k").argv
    assert "--reviewer-reads-gold" in plan.stage("collect-abl-gold").argv
    hstar = plan.stage("collect-abl-hstar").argv
    assert "--reviewer" not in hstar and hstar[hstar.index("--harness") + 1] == "hstar"
    assert "--include-hstar" in plan.stage("build-sft-abl-hstar").argv
    cells = [published.ablation_cell(n, "retrosynthesis") for n in ("empty-k", "gold", "hstar")]
    assert [c.value if c else None for c in cells] == [11.0, 15.0, 12.0]
    assert published.ablation_cell("gold", "spreadsheet") is None
    other = build_plan("harness-zero", "appworld_lite", "paper", models, 1)
    assert not [s for s in other.stages if "-abl-" in s.name]  # the published ablation is chemistry's


def test_the_paper_harness_s_plan_builds_the_routers_validation_table() -> None:
    from unscaffold.rescue.pool import load_pool, shipped_pool

    siblings = load_pool(shipped_pool("retrosynthesis")).names
    plan = build_plan("harness-s", "retrosynthesis", "paper", Models(model="Qwen/Qwen3-8B",
                                                                      reviewer="anthropic:claude"), 1)
    names = [s.name for s in plan.stages]
    assert names[:3 + len(siblings)] == ["base-h", "pool", "val-base", *(f"val-{n}" for n in siblings)]
    first = plan.stage(f"val-{siblings[0]}").argv
    assert first[first.index("--harness") + 1] == f"{{dir}}/pool/{siblings[0]}" and "--no-finish-checks" in first
    rule, adaptive = plan.stage("rescue-rule").argv, plan.stage("rescue-adaptive").argv
    assert rule[rule.index("--validation") + 1] == "{dir}/validation.json" and "--profiler" not in rule
    assert adaptive[adaptive.index("--profiler") + 1] == "anthropic:claude"
    assert plan.stage("rescue-rule").after == ["validation"] and plan.stage("rescue-random").after == []
    assert plan.stage("routed").argv[plan.stage("routed").argv.index("--router") + 1] == \
        "{dir}/rescue-adaptive/router.json"
    without = build_plan("harness-s", "retrosynthesis", "paper", Models(model="Qwen/Qwen3-8B"), 1)
    assert "rescue-adaptive" not in [s.name for s in without.stages]  # no LLM to write its profiles
    assert "{dir}/rescue-rule/router.json" in without.stage("routed").argv


def test_the_table_is_written_in_three_forms_and_printed_folded_at_80_columns(tmp_path: Path) -> None:
    import io
    import json

    from unscaffold.reproduce.table import Cost as RowCost
    from unscaffold.reproduce.table import Measured, Row, Table, write_table

    table = Table(recipe="harness-zero", suite="retrosynthesis", scale="mini", model="tiny-wide", metric="pass@1",
                  published_metric="pass@1 (published)", notes=["a note"], rows=[
                      Row(label="base + h", measured=Measured(value=50.0, low=16.7, high=83.3, metric="6 tasks",
                                                              run="base-h"),
                          published=published.harness_zero_cell("base + h", "retrosynthesis")),
                      Row(label="distilled + h (budget 5)", cost=RowCost(rollouts=8, reviewer_calls=40,
                                                                          training_steps=400, wall_s=114.6))])
    out = io.StringIO()
    write_table(table, tmp_path, Console(file=out, width=80))
    assert json.loads((tmp_path / "table.json").read_text())["rows"][0]["published"]["value"] == 12.0
    md = (tmp_path / "table.md").read_text()
    assert "| base + h | 50.0 [16.7, 83.3] | 12.00 | - | - | - | - |  |" in md
    assert "| distilled + h (budget 5) | not run | - | 8 | 40 | 400 | 115 |  |" in md
    assert "<td class=num>50.0 [16.7, 83.3]</td>" in (tmp_path / "table.html").read_text()
    printed = out.getvalue().splitlines()
    assert printed[0] == "harness-zero on retrosynthesis (mini) (2 rows, one block each)"
    assert all(len(line) <= 80 for line in printed[:-1]) and "- a note" in printed
