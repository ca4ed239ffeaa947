"""`unscaffold behaviors` and `unscaffold compare` on real runs (replay students on three retrosynthesis
tasks, through `unscaffold run`) and on hand-built run folders for the edge cases."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.helpers import CHROMIUM, EXAMPLES, call, final, needs_bwrap, rendered_dom
from unscaffold.behaviors.html import forest_chart
from unscaffold.behaviors.labels import label_run
from unscaffold.behaviors.stats import Interval, bootstrap, paired
from unscaffold.benchmarks.retrosynthesis.suite import RetrosynthesisSuite
from unscaffold.cli import app
from unscaffold.errors import InputError
from unscaffold.iojson import write_json_atomic
from unscaffold.llm.types import Message
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.run.models import RunConfig, RunResults, TrialResult
from unscaffold.suites import find

TASKS = ["rxn-003", "rxn-006", "rxn-009"]
SUITE = RetrosynthesisSuite()
FAMILY = ["tool:check_reactants", "check:answer_validated", "check:answer_valid", "check:reactant_coverage",
          "skill:filter-candidates", "skill:write-answer", "memory:counter-ions", "memory:reagents-not-reactants"]
FORWARD = ["tool:forward_check", "skill:verify-forward"]
HARBOR_BANK = EXAMPLES / "hstar" / "harbor_bank"


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


def tool(name: str, **arguments: str) -> dict[str, Any]:
    return {"tool_call": {"name": name, "arguments": arguments}}


def own_check_and_write(product: str, reactants: str) -> str:
    """What a tuned model writes in its own words (no recipe text): parse the reactants with RDKit, compare
    elements, rings and charges with the product, write the canonical line to answer.txt."""
    return f"""python3 - <<'EOF'
from rdkit import Chem
target = Chem.MolFromSmiles("{product}")
parts = [Chem.MolFromSmiles(s) for s in "{reactants}".split(".")]
assert all(m is not None for m in parts), "a reactant does not parse"
missing = {{a.GetSymbol() for a in target.GetAtoms()}} - {{a.GetSymbol() for m in parts for a in m.GetAtoms()}}
assert not missing, f"elements missing: {{missing}}"
print("rings:", target.GetRingInfo().NumRings(), [m.GetRingInfo().NumRings() for m in parts])
print("charges:", [Chem.GetFormalCharge(m) for m in parts])
line = ".".join(Chem.MolToSmiles(m) for m in parts)
with open("answer.txt", "w") as fh:
    fh.write(line + "\\n")
print(line)
EOF"""


def own_forward_check(product: str, reactants: str) -> str:
    """A forward check in the model's own words: a generic coupling template run on the reactants."""
    return (f"python3 -c \"from rdkit import Chem; from rdkit.Chem import AllChem; "
            f"rxn = AllChem.ReactionFromSmarts('[C:1](=O)[OH].[N:2]>>[C:1](=O)[N:2]'); "
            f"mols = [Chem.MolFromSmiles(s) for s in '{reactants}'.split('.')]; "
            f"made = [Chem.MolToSmiles(p[0]) for p in rxn.RunReactants(tuple(mols[:2]))]; "
            f"print(Chem.CanonSmiles('{product}') in made, made)\"")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """base + h (wrong on rxn-009), base + h* (checks every answer, forward-checks two), and a tuned student
    that, in its own words (no recipe text), checks and writes two answers and forward-checks one; plus a
    run missing a task and a collection."""
    from tests.helpers import BWRAP

    if not BWRAP:
        pytest.skip("bubblewrap is not installed or not usable here")
    root = tmp_path_factory.mktemp("behaviours")
    replays: dict[str, dict[str, list]] = {"base_h": {}, "base_hstar": {}, "tuned": {}}
    for i, task in enumerate(t for t in SUITE.tasks("test") if t.id in TASKS):
        oracle = SUITE.oracle_commands(task)[0]
        product = re.search(r"Product SMILES: (\S+)", task.instruction).group(1)
        reactants = shlex.split(oracle)[2]
        check = {"smiles": reactants, "product": product, "write_to": "answer.txt"}
        forward = {"product": product, "reactants": reactants}
        replays["base_h"][task.id] = [call(oracle if i < 2 else "printf '%s\\n' 'CCO' > answer.txt"), final("Done.")]
        replays["base_hstar"][task.id] = ([tool("forward_check", **forward)] if i < 2 else []) + [
            tool("check_reactants", **check), final("Done.")]
        replays["tuned"][task.id] = [call(own_check_and_write(product, reactants)) if i < 2 else call(oracle),
                                     *([call(own_forward_check(product, reactants))] if i == 0 else []),
                                     final("Done.")]
        assert "UNSCAFFOLD_RECIPE" not in json.dumps(replays["tuned"][task.id])
    out = {}
    for name, entries in replays.items():
        (root / f"{name}.json").write_text(json.dumps(entries))
    for name, student, extra in (
        ("base_h", "base_h", []), ("base_hstar", "base_hstar", ["--harness", "hstar"]), ("tuned", "tuned", []),
        ("partial", "base_h", ["--tasks", "rxn-003,rxn-006"]), ("collection", "tuned", ["--reviewer", "passthrough"]),
    ):
        out[name] = root / "runs" / name
        tasks = extra if "--tasks" in extra else ["--tasks", ",".join(TASKS), *extra]
        result = invoke("run", "retrosynthesis", "--split", "test", "--student", f"replay:{root / student}.json",
                        "--out", out[name], *tasks)
        assert result.exit_code == 0, result.output
    return out


def recovery_json(runs: dict[str, Path], *extra: str, tuned: str = "tuned") -> dict[str, Any]:
    result = invoke("behaviors", "--base-h", runs["base_h"], "--base-hstar", runs["base_hstar"],
                    "--tuned", runs[tuned], "--json", *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@needs_bwrap
def test_recovery_table_from_real_runs(runs: dict[str, Path]) -> None:
    table = recovery_json(runs, "--min-eligible", "2")
    rows = {r["component"]: r for r in table["behaviors"]}
    # components sharing a detector are one behaviour, one row: the tool and the skill teaching it
    family = [c for c in FAMILY if c != "skill:filter-candidates"]
    assert sorted(rows) == sorted([*family, FORWARD[0], "check:justified_write"])
    assert rows["tool:check_reactants"]["components"] == ["tool:check_reactants", "skill:filter-candidates"]
    assert rows["tool:forward_check"]["components"] == FORWARD
    for component in family:
        assert (rows[component]["eligible"], rows[component]["recovered"], rows[component]["rate"]) == (3, 2, 66.6667)
        assert rows[component]["eligible_tasks"] == TASKS and rows[component]["recovered_tasks"] == TASKS[:2]
        assert rows[component]["shown"] == {"base_h": 0, "base_hstar": 3, "tuned": 2}
        # base + h and tuned ran commands, recorded in evidence.jsonl; base + h* made only tool calls (no evidence)
        assert rows[component]["decided_by"] == ({"evidence": 6, "text": 3} if component in (
            "check:answer_validated", "check:answer_valid") else {"text": 9})
    assert (rows[FORWARD[0]]["eligible"], rows[FORWARD[0]]["recovered"], rows[FORWARD[0]]["rate"]) == (2, 1, 50.0)
    # the h* checking tool writes only after its check; the tuned student compared elements before writing
    justified = rows["check:justified_write"]
    assert (justified["eligible_tasks"], justified["recovered_tasks"], justified["rate"]) == (TASKS, TASKS[:2],
                                                                                                 66.6667)
    assert table["mean"] == 64.8148  # (8 x 66.6667 + 50) / 9 distinct behaviours
    dropped = {r["component"]: r for r in table["dropped"]}
    assert dropped["check:stall"]["shown"] == {"base_h": 3, "base_hstar": 3, "tuned": 3}  # h already shows it
    assert dropped["check:stall"]["eligible"] == 0 and dropped["check:stall"]["rate"] is None
    assert len(dropped) == 15 - 9  # 18 components, 15 distinct behaviours
    # the tuned forward check ran a template on the reactants, which lists no precursors of the product
    assert dropped["tool:retro_candidates"]["shown"] == {"base_h": 0, "base_hstar": 0, "tuned": 0}
    assert "published" not in table  # a pooled figure over three domains: shown beside a pooled mean only
    assert (table["excluded"], table["excluded_by_run"]) == ([], {})
    assert (table["rule"], table["min_eligible"], table["n_tasks"], table["suite"]) == ("any", 2, 3, "retrosynthesis")
    assert table["bank"] == str(SUITE.bank_path())
    assert table["notes"] == [f"the base runs have different students (replay:{runs['base_h'].parent.parent}"
                              f"/base_h.json under h, replay:{runs['base_h'].parent.parent}/base_hstar.json under h*)"]
    published_minimum = recovery_json(runs)  # 10 eligible tasks, as published: three tasks drop them all
    assert (published_minimum["behaviors"], published_minimum["mean"]) == ([], None)
    assert len(published_minimum["dropped"]) == 15


@needs_bwrap
def test_recovery_terminal_table_and_page(runs: dict[str, Path], tmp_path: Path) -> None:
    page = tmp_path / "recovery.html"
    result = invoke("behaviors", "--base-h", runs["base_h"], "--base-hstar", runs["base_hstar"], "--tuned",
                    runs["tuned"], "--min-eligible", "2", "--out", page)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # sentences wrap at the terminal's width
    assert "mean recovery (retrosynthesis): 64.8% over 9 behaviour(s) with at least 2 eligible task(s)" in text
    assert "82.3" not in result.output and "excluded" not in result.output
    assert "rule: a task shows a behaviour when any of its trials does (any)" in text
    html = page.read_text()
    assert not re.search(r"""(?:src|href)=["']https?://""", html)
    assert html.count("<tr>") == 1 + 9 + 1 + 6  # header + kept, header + dropped
    assert html.count('width="173.3"') == 8 and html.count('width="130.0"') == 1  # 66.67% and 50% of 260 px
    assert "<b>64.8%</b>" in html and "82.3" not in html


@needs_bwrap
@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")
def test_pages_render_in_headless_chromium(runs: dict[str, Path], tmp_path: Path) -> None:
    page = tmp_path / "compare.html"
    distilled = relabelled(runs["tuned"], tmp_path / "distilled", "distilled")
    result = invoke("compare", runs["base_h"], runs["base_hstar"], distilled, "--min-eligible", "2", "--out", page)
    assert result.exit_code == 0, result.output
    dom = rendered_dom(page, "", tmp_path)
    rows = re.findall(r"<tr><td>([^<]+)</td><td>(replay[^<]*)</td>", dom)  # the scores table: label, model
    assert [label for label, _ in rows] == ["base + h", "base + h*", "distilled + h"]
    assert rows[2][1] == "replay of a tuned model"  # as its model.json says
    assert dom.count('<td class="num">+33.3 [+0.0, +100.0]</td>') == 2  # each against base + h
    assert dom.count('<svg class="plot"') == 3  # pass@1 per run, Δ against the baseline, recovery
    assert "Behaviour recovery: " + str(distilled) in dom


def test_bootstrap_is_seeded_and_paired_counts_tasks() -> None:
    three = bootstrap([1.0, 1.0, 0.0], seed=0)
    assert (three.value, three.low, three.high) == (66.6667, 0.0, 100.0)
    assert bootstrap([1.0, 0.0, 1.0, 0.5], seed=3) == bootstrap([1.0, 0.0, 1.0, 0.5], seed=3)
    assert bootstrap([1.0] * 5).model_dump() == {"value": 100.0, "low": 100.0, "high": 100.0}
    diff = paired({"a": 1.0, "b": 0.0, "c": 1.0, "d": 0.5}, {"a": 0.0, "b": 0.0, "c": 1.0, "d": 1.0})
    assert (diff.better, diff.worse, diff.same, diff.diff.value) == (1, 1, 2, 12.5)


def test_forest_chart_places_intervals_on_the_axis() -> None:
    svg = forest_chart("Δ", [("run", Interval(value=0.0, low=-50.0, high=50.0))], -100.0, 100.0)
    assert '<line x1="245.0" y1="32" x2="395.0" y2="32"' in svg and '<circle cx="320.0" cy="32"' in svg
    assert '<line x1="320.0" y1="20" x2="320.0"' in svg  # the zero mark
    assert "+0.0 [-50.0, +50.0]" in svg


def relabelled(run: Path, dest: Path, kind: str) -> Path:
    """A copy of a run whose model.json says what its (replayed) student is."""
    shutil.copytree(run, dest)
    (dest / "model.json").write_text(json.dumps({"kind": kind, "base": "replay of a tuned model"}))
    return dest


@needs_bwrap
def test_compare_scores_pairs_and_recovery(runs: dict[str, Path], tmp_path: Path) -> None:
    distilled = relabelled(runs["tuned"], tmp_path / "distilled", "distilled")
    result = invoke("compare", runs["base_h"], runs["base_hstar"], distilled, "--min-eligible", "2", "--json")
    assert result.exit_code == 0, result.output
    cmp = json.loads(result.stdout)
    assert [r["label"] for r in cmp["runs"]] == ["base + h", "base + h*", "distilled + h"]
    assert [r["scores"]["pass_at_1"]["value"] for r in cmp["runs"]] == [66.6667, 100.0, 100.0]
    assert cmp["runs"][0]["vs_baseline"] is None and cmp["baseline"] == str(runs["base_h"])
    vs = cmp["runs"][1]["vs_baseline"]
    assert (vs["better"], vs["worse"], vs["same"], vs["diff"]["value"]) == (1, 0, 2, 33.3333)
    assert [r["cost"]["student_calls"] for r in cmp["runs"]] == [6, 8, 7]
    assert [r["cost"]["training_steps"] for r in cmp["runs"]] == [None, None, None]
    assert len(cmp["recovery"]) == 1 and cmp["recovery"][0]["mean"] == 64.8148
    assert cmp["recovery"][0]["runs"]["tuned"] == str(distilled)
    again = invoke("compare", runs["base_h"], runs["base_hstar"], distilled, "--min-eligible", "2", "--json")
    assert again.stdout == result.stdout  # the bootstrap is seeded
    swapped = json.loads(invoke("compare", runs["base_h"], runs["base_hstar"], "--baseline", runs["base_hstar"],
                                "--json").stdout)
    vs = swapped["runs"][0]["vs_baseline"]
    assert (vs["better"], vs["worse"], vs["diff"]["value"]) == (0, 1, -33.3333)
    assert swapped["recovery"] == [] and swapped["recovery_note"] == (
        "behaviour recovery needs one base + h run, one base + h* run and a trained model under h; found 1, 1 and 0")


@needs_bwrap
def test_same_labels_are_told_apart_by_folder(runs: dict[str, Path]) -> None:
    cmp = json.loads(invoke("compare", runs["base_h"], runs["tuned"], "--json").stdout)
    assert [r["label"] for r in cmp["runs"]] == ["base + h (base_h)", "base + h (tuned)"]


@needs_bwrap
@pytest.mark.parametrize("args,message", [
    (["--base-h", "partial", "--base-hstar", "base_hstar", "--tuned", "tuned"],
     "{partial}: missing 1 task(s) the other runs have (rxn-009); compare runs over the same tasks"),
    (["--base-h", "base_hstar", "--base-hstar", "base_hstar", "--tuned", "tuned"],
     "--base-h {base_hstar}: ran under harness 'hstar'; this role needs the minimal harness h"),
    (["--base-h", "base_h", "--base-hstar", "tuned", "--tuned", "tuned"],
     "--base-hstar {tuned}: ran under harness 'minimal'; this role needs an h* harness (--harness hstar or a bank)"),
    (["--base-h", "base_h", "--base-hstar", "base_hstar", "--tuned", "collection"],
     "--tuned {collection}: a reviewed collection (reviewer passthrough); behaviour recovery reads evaluations "
     "without a reviewer"),
    (["--base-h", "base_h", "--base-hstar", "base_hstar", "--tuned", "tuned", "--rule", "all"],
     "--rule: unknown rule 'all'; use any or majority"),
])
def test_behaviors_refuses_mixed_runs(runs: dict[str, Path], args: list[str], message: str) -> None:
    named = [str(runs[a]) if a in runs else a for a in args]
    result = invoke("behaviors", *named)
    assert result.exit_code == 2
    assert result.output == f"error: {message.format(**{k: str(v) for k, v in runs.items()})}\n"


@needs_bwrap
def test_compare_refuses_mixed_runs(runs: dict[str, Path], tmp_path: Path) -> None:
    result = invoke("compare", runs["base_h"], runs["partial"])
    assert (result.exit_code, result.output) == (2, f"error: {runs['partial']}: missing 1 task(s) the other runs "
                                                    "have (rxn-009); compare runs over the same tasks\n")
    result = invoke("compare", runs["base_h"], runs["tuned"], "--baseline", runs["base_hstar"])
    assert result.output == f"error: --baseline {runs['base_hstar']}: not one of the compared runs\n"
    result = invoke("compare", runs["base_h"], runs["base_h"])
    assert result.output == "error: compare: a run is named twice\n"
    other = hand_run(tmp_path / "apps", "appworld_lite", {"rxn-003": [["ls"]]})
    result = invoke("compare", runs["base_h"], other)
    assert result.output == (f"error: {other}: suite 'appworld_lite' differs from {runs['base_h']} "
                             "('retrosynthesis'); compare runs of one suite\n")
    result = invoke("compare", runs["base_h"], tmp_path / "nowhere")
    assert result.output == f"error: {tmp_path / 'nowhere'}: run folder not found\n"
    (tmp_path / "unfinished").mkdir()
    result = invoke("compare", runs["base_h"], tmp_path / "unfinished")
    assert result.output == (f"error: {tmp_path / 'unfinished'}: no results.json: not a finished run (re-running "
                             "its command resumes it)\n")


# ---- hand-built run folders -----------------------------------------------------------------------------


def hand_run(path: Path, suite: str, trials: dict[str, list[list[str]]], *, harness: str = "minimal",
             student: str = "replay:student.json", rewards: dict[str, list[float]] | None = None,
             scenarios: dict[str, str] | None = None, extra: dict[str, Any] | None = None,
             split: str | None = None) -> Path:
    """A finished run as `unscaffold run` leaves it: config, results, and per trial its commands."""
    write_json_atomic(path / "config.json", RunConfig(
        suite=suite, student=student, out=path, harness=harness, split=split,
        trials=max(len(t) for t in trials.values())).model_dump(mode="json"))
    per_task = {}
    for task, commands_per_trial in trials.items():
        task_rewards = (rewards or {}).get(task, [1.0] * len(commands_per_trial))
        per_task[task] = sum(task_rewards) / len(task_rewards)
        for k, commands in enumerate(commands_per_trial):
            trial_id = f"{task}__{k}"
            messages = [Message(role="user", content="task")]
            for i, command in enumerate(commands):
                messages += [Message(role="assistant", tool_calls=[{"id": str(i), "function": {
                    "name": "execute", "arguments": {"command": command}}}]),
                    Message(role="tool", tool_call_id=str(i), content="ok\n[exit_code=0]")]
            Trajectory(trial_id=trial_id, task_id=task, suite=suite, student=student, harness=harness, tools=[],
                       messages=messages).save(path / "trials" / trial_id / "trajectory.json")
            write_json_atomic(path / "trials" / trial_id / "result.json", TrialResult(
                trial_id=trial_id, task_id=task, scenario=(scenarios or {}).get(task), reward=task_rewards[k],
                exit_status="submitted", turns=len(commands) + 1, started_at="t", ended_at="t"))
    n_trials = sum(len(t) for t in trials.values())
    results = RunResults(suite=suite, student=student, harness=harness, split=split, n_tasks=len(trials),
                         n_trials=n_trials, pass_at_1=0.0, mean_reward=0.0, per_task=per_task,
                         unscaffold_version="test", **(extra or {}))
    write_json_atomic(path / "results.json", results.model_dump(mode="json"))
    return path


def test_trial_rule_any_or_majority(tmp_path: Path) -> None:
    cat, ls = ["cat out.txt"], ["ls"]
    base_h = hand_run(tmp_path / "h", "harbor", {"a": [ls] * 3, "b": [ls] * 3})
    base_hstar = hand_run(tmp_path / "hs", "harbor", {"a": [cat] * 3, "b": [cat] * 3}, harness=str(HARBOR_BANK))
    tuned = hand_run(tmp_path / "t", "harbor", {"a": [cat, ls, ls], "b": [cat, cat, ls]})
    rates = {}
    for rule in ("any", "majority"):
        table = recovery_json({"base_h": base_h, "base_hstar": base_hstar, "tuned": tuned}, "--min-eligible", "2",
                              "--rule", rule)
        rates[rule] = {r["component"]: (r["eligible"], r["recovered"], r["rate"]) for r in table["behaviors"]}
        assert table["notes"][0] == f"trials per task: 3 ({table['rule_text']})"
        assert [r["component"] for r in table["dropped"]] == ["memory:tie-order"]
    assert rates["any"] == {"tool:show_file": (2, 2, 100.0), "check:show_before_finish": (2, 2, 100.0)}
    assert rates["majority"] == {"tool:show_file": (2, 1, 50.0), "check:show_before_finish": (2, 1, 50.0)}
    for trial in ("a__1", "a__2"):  # trials lost to the machinery do not vote: task a now shows it 1 of 1
        result = json.loads((tuned / "trials" / trial / "result.json").read_text())
        (tuned / "trials" / trial / "result.json").write_text(json.dumps({**result, "infra_error": True}))
    table = recovery_json({"base_h": base_h, "base_hstar": base_hstar, "tuned": tuned}, "--min-eligible", "2",
                          "--rule", "majority")
    assert [(r["recovered"], r["rate"]) for r in table["behaviors"]] == [(2, 100.0), (2, 100.0)]


def test_runs_of_other_splits_are_refused(tmp_path: Path) -> None:
    train = hand_run(tmp_path / "train", "harbor", {"a": [["ls"]]}, split="train")
    test = hand_run(tmp_path / "test", "harbor", {"a": [["ls"]]}, split="test")
    default = hand_run(tmp_path / "default", "harbor", {"a": [["ls"]]})
    result = invoke("compare", train, test)
    assert (result.exit_code, result.output) == (2, f"error: {test}: split 'test' differs from {train} ('train'); "
                                                    "compare runs of one split\n")
    assert invoke("compare", train, default).exit_code == 0  # the suite's default split: the tasks decide


def test_bank_of_the_hstar_run_must_be_found(tmp_path: Path) -> None:
    base_h = hand_run(tmp_path / "h", "harbor", {"a": [["ls"]]})
    base_hstar = hand_run(tmp_path / "hs", "harbor", {"a": [["cat out.txt"]]}, harness="gone/bank")
    tuned = hand_run(tmp_path / "t", "harbor", {"a": [["head out.txt"]]})
    args = ["behaviors", "--base-h", base_h, "--base-hstar", base_hstar, "--tuned", tuned, "--min-eligible", "1"]
    result = invoke(*args)
    assert (result.exit_code, result.output) == (2, f"error: {base_hstar}: its h* bank 'gone/bank' (config.json "
                                                    "harness) is not found from here; pass --bank\n")
    table = json.loads(invoke(*args, "--bank", HARBOR_BANK, "--json").stdout)
    assert [(r["component"], r["rate"]) for r in table["behaviors"]] == [("tool:show_file", 100.0),
                                                                         ("check:show_before_finish", 100.0)]


def test_scenario_scores_and_training_cost(tmp_path: Path) -> None:
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "summary.json").write_text(json.dumps({"steps": 12, "final_loss": 0.5}))
    tasks = {t: [["ls"]] for t in ("s1-1", "s1-2", "s2-1", "s2-2")}
    scenarios = {t: t.split("-")[0] for t in tasks}
    extra = {"tgc": 0.0, "sgc": 0.0}
    base = hand_run(tmp_path / "base", "appworld_lite", tasks, scenarios=scenarios, extra=extra,
                    rewards={"s1-1": [0.0], "s2-2": [0.0]})
    tuned = hand_run(tmp_path / "tuned", "appworld_lite", tasks, scenarios=scenarios, extra=extra,
                     student=f"hf:Qwen/Qwen3-0.6B+{adapter}", rewards={"s2-2": [0.0]})
    cmp = json.loads(invoke("compare", base, tuned, "--json").stdout)
    assert [r["label"] for r in cmp["runs"]] == ["base + h", "distilled + h"]
    assert [(r["scores"]["tgc"]["value"], r["scores"]["sgc"]["value"]) for r in cmp["runs"]] == [(50.0, 0.0),
                                                                                                 (75.0, 50.0)]
    assert cmp["runs"][1]["scores"]["sgc"]["low"] == 0.0 and cmp["runs"][1]["scores"]["sgc"]["high"] == 100.0
    assert cmp["runs"][1]["cost"]["training_steps"] == 12 and cmp["runs"][1]["cost"]["rollouts"] is None
    assert cmp["runs"][1]["what"]["model"] == "hf:Qwen/Qwen3-0.6B" and cmp["runs"][1]["what"]["adapter"] == str(adapter)
    assert cmp["recovery_note"].endswith("found 1, 0 and 1")


def rescue_output(out: Path, method: str, rollouts: list[int]) -> Path:
    """The folder layout `rescue train` leaves: metrics.jsonl and summary.json beside adapter/."""
    (out / "adapter").mkdir(parents=True)
    (out / "adapter" / "adapter_config.json").write_text("{}")
    (out / "metrics.jsonl").write_text("".join(json.dumps({"step": i + 1, "rollouts": n}) + "\n"
                                               for i, n in enumerate(rollouts)))
    grpo = 16 * len(rollouts)
    (out / "summary.json").write_text(json.dumps({"method": method, "steps": len(rollouts), "wall_s": 12.5,
                                                  "effective_group_rate": 0.75,
                                                  "extra_rollout_pct": 100.0 * (sum(rollouts) - grpo) / grpo}))
    return out / "adapter"


def test_compare_labels_rescue_train_outputs_from_their_records(tmp_path: Path) -> None:
    grpo = rescue_output(tmp_path / "grpo", "none", [16, 16])
    rescued = rescue_output(tmp_path / "rescued", "adaptive", [16, 24, 32])
    tasks = {t: [["ls"]] for t in ("a", "b")}
    base = hand_run(tmp_path / "base", "appworld_lite", tasks)
    runs = [hand_run(tmp_path / name, "appworld_lite", tasks, student=f"hf:Qwen/Qwen3-0.6B+{adapter}")
            for name, adapter in (("r1", grpo), ("r2", rescued))]
    cmp = json.loads(invoke("compare", base, *runs, "--json").stdout)
    assert [r["label"] for r in cmp["runs"]] == ["base + h", "rescue-trained + h (none)",
                                                 "rescue-trained + h (adaptive)"]
    costs = [r["cost"] for r in cmp["runs"]]
    assert [(c["training_method"], c["training_steps"], c["rollouts"], c["training_wall_s"]) for c in costs] == [
        (None, None, None, None), ("none", 2, 32, 12.5), ("adaptive", 3, 72, 12.5)]
    assert [c["student_rollouts"] for c in costs] == [2, 2, 2]
    # outputs without a training record (suite, K, re-anchoring) get no published figure beside them
    assert [(m["method"], m["effective_group_rate"], m["extra_rollout_pct"], m["published"], m["published_note"])
            for m in cmp["rescue_methods"]] == [
        ("none", 75.0, 0.0, None, "no training record to check against the published setup"),
        ("adaptive", 75.0, 50.0, None, "no training record to check against the published setup")]
    assert cmp["published_source"].startswith("published figures: Harness-S, AppWorld, 4B; effective group rate: ")
    one = json.loads(invoke("compare", base, runs[1], "--json").stdout)
    assert [r["label"] for r in one["runs"]] == ["base + h", "rescue-trained + h"]
    page = tmp_path / "compare.html"
    invoke("compare", base, runs[1], "--out", page)
    html = page.read_text()
    assert f"hf:Qwen/Qwen3-0.6B + {rescued} (rescue: adaptive)" in html and "<th>training rollouts</th>" in html
    assert "<h2>Rescue training</h2>" in html and "Harness-S (adaptive router)" not in html
    assert "none shown: no training record to check against the published setup" in html


# ---- labels from the runs' own records --------------------------------------------------------------------


def test_labels_from_records(tmp_path: Path) -> None:
    sft, rescue, unknown = tmp_path / "sft", tmp_path / "rescue", tmp_path / "unknown"
    for folder in (sft, rescue, unknown):
        folder.mkdir()
    (sft / "train_log.jsonl").write_text('{"step": 1, "loss": 2.0, "lr": 0.1}\n{"step": 5, "loss": 1.0, "lr": 0.1}\n')
    (rescue / "metrics.jsonl").write_text('{"step": 1, "rollouts": 64}\n{"step": 2, "rollouts": 72}\n')
    run = tmp_path / "run"
    run.mkdir()
    label = label_run(run, {"student": f"hf:base+{sft}", "harness": "minimal"})
    assert (label.text, label.kind, label.model, label.training.steps) == ("distilled + h", "distilled", "hf:base", 5)
    label = label_run(run, {"student": f"hf:base+{rescue}", "harness": "minimal"})
    assert (label.text, label.training.steps, label.training.rollouts) == ("rescue-trained + h", 2, 136)
    assert label_run(run, {"student": f"hf:base+{unknown}", "harness": "minimal"}).text == "tuned + h"
    assert label_run(run, {"student": "hf:base", "harness": str(HARBOR_BANK)}).text == "base + h* (harbor_bank)"
    assert label_run(run, {"student": "oracle", "harness": "hstar", "reviewer": "rules"}).text == \
        "oracle + h* + reviewer"
    assert label_run(run, {"student": f"hf:base+{rescue}", "harness": "minimal", "router": "adaptive"}).text == \
        "rescue-trained + routed (adaptive)"
    (tmp_path / "router.json").write_text(json.dumps({"router": "rule", "siblings": [], "rankings": {}}))
    assert label_run(run, {"student": f"hf:base+{rescue}", "harness": "route:shipped",
                           "router": str(tmp_path / "router.json")}).text == "rescue-trained + routed (rule, trained)"
    (run / "model.json").write_text(json.dumps({"kind": "distilled", "adapter": str(sft)}))
    served = "openai:served@http://localhost:8000/v1"
    label = label_run(run, {"student": served, "harness": "minimal"})
    assert (label.text, label.model, label.training.steps) == ("distilled + h", served, 5)
    (run / "model.json").write_text(json.dumps({"kind": "distilled", "adapters": "x"}))
    with pytest.raises(InputError, match=r"model\.json: adapters: Extra inputs are not permitted"):
        label_run(run, {"student": "hf:base", "harness": "minimal"})


def set_outcome(run: Path, trial: str, outcome: str) -> None:
    path = run / "trials" / trial / "result.json"
    result = json.loads(path.read_text())
    path.write_text(json.dumps({**result, "outcome": outcome, "reward": 0.0, "reason": outcome}))


def harbor_runs(root: Path) -> dict[str, Path]:
    """Five tasks; the tuned model shows the file on a and b only. Task d lost its tuned trial to the
    environment, task e its base + h* trial to the infrastructure; c's base + h verifier failed, after
    the trial completed."""
    cat, ls = ["cat out.txt"], ["ls"]
    tasks = "abcde"
    runs = {"base_h": hand_run(root / "h", "harbor", {t: [ls] for t in tasks}),
            "base_hstar": hand_run(root / "hs", "harbor", {t: [cat] for t in tasks}, harness=str(HARBOR_BANK)),
            "tuned": hand_run(root / "t", "harbor", {t: [cat if t in "ab" else ls] for t in tasks})}
    set_outcome(runs["tuned"], "d__0", "environment_error")
    set_outcome(runs["base_hstar"], "e__0", "infra_error")
    set_outcome(runs["base_h"], "c__0", "verifier_error")
    return runs


def test_tasks_without_a_completed_trial_are_excluded_and_counted(tmp_path: Path) -> None:
    runs = harbor_runs(tmp_path)
    table = recovery_json(runs, "--min-eligible", "2")
    rows = {r["component"]: r for r in table["behaviors"]}
    # d and e are neither eligible nor "not shown": without them, 2 of 3 (not 2 of 4)
    assert (rows["tool:show_file"]["eligible_tasks"], rows["tool:show_file"]["recovered_tasks"]) == (
        ["a", "b", "c"], ["a", "b"])
    assert rows["tool:show_file"]["rate"] == 66.6667
    assert rows["tool:show_file"]["shown"] == {"base_h": 0, "base_hstar": 3, "tuned": 2}
    assert (table["excluded"], table["excluded_by_run"]) == (["d", "e"], {"base_hstar": ["e"], "tuned": ["d"]})
    assert table["n_tasks"] == 5
    result = invoke("behaviors", "--base-h", runs["base_h"], "--base-hstar", runs["base_hstar"], "--tuned",
                    runs["tuned"], "--min-eligible", "2")
    assert "excluded: 2 task(s) without a completed trial (infrastructure or environment failures; base_hstar 1, " \
           "tuned 1), counted in no behaviour" in " ".join(result.output.split())


APPWORLD_BANK = find("appworld_lite").bank
DOC = "python3 -c \"from apis import apis; print(apis.api_docs.show_api_doc(app_name='notes', api_name='show_notes'))\""
NOTES = "python3 -c \"from apis import apis; print(apis.notes.show_notes(access_token='t'))\""


def test_several_suites_give_per_suite_and_pooled_means(tmp_path: Path) -> None:
    runs = harbor_runs(tmp_path / "harbor")  # show_file and show_before_finish at 66.6667, with d and e excluded
    apps = {"base_h": hand_run(tmp_path / "apps" / "h", "appworld_lite", {t: [[NOTES]] for t in "xyz"}),
            "base_hstar": hand_run(tmp_path / "apps" / "hs", "appworld_lite", {t: [[DOC, NOTES]] for t in "xyz"},
                                   harness=str(APPWORLD_BANK)),
            "tuned": hand_run(tmp_path / "apps" / "t", "appworld_lite",
                              {"x": [[DOC, NOTES]], "y": [[NOTES]], "z": [[NOTES, DOC]]})}
    args = ["behaviors", "--min-eligible", "2"]
    for role in ("base_h", "base_hstar", "tuned"):  # the suites' runs in any order
        args += [f"--{role.replace('_', '-')}", runs[role], f"--{role.replace('_', '-')}", apps[role]]
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [t["suite"] for t in report["suites"]] == ["harbor", "appworld_lite"]
    apps_rows = {r["component"]: (r["eligible"], r["recovered"]) for r in report["suites"][1]["behaviors"]}
    # the doc came first on x only; on z the tuned student looked it up after the app call
    # the tool and the skill teaching doc-first share one detector: one behaviour (likewise the two doc checks)
    assert apps_rows == {"tool:api_doc": (3, 1), "check:doc_after_error": (3, 2)}
    assert report["suite_means"] == {"harbor": 66.6667, "appworld_lite": 50.0}
    # the pooled mean is over the 4 kept behaviours, not a mean of the two suite means
    assert (report["behaviors"], report["mean"], report["excluded"]) == (4, 58.3334, 2)
    assert report["published"]["mean"] == 82.3 and report["published"]["per_domain"] == {
        "SpreadsheetBench": 18, "USPTO": 6, "AppWorld": 4}
    assert all("published" not in t for t in report["suites"])
    text = " ".join(invoke(*args).output.split())
    assert "mean recovery (harbor): 66.7% over 2 behaviour(s)" in text
    assert "mean recovery (appworld_lite): 50.0% over 2 behaviour(s)" in text
    assert ("pooled mean recovery (2 suites): 58.3% over 4 behaviour(s); published: 82.3% (Harness-Zero, behaviour "
            "recovery of distilled Qwen3.5-9B + h, 28 behaviours: 18 SpreadsheetBench, 6 USPTO, 4 AppWorld)") in text
    assert text.count("82.3") == 1
    page = tmp_path / "pooled.html"
    assert invoke(*args, "--out", page).exit_code == 0
    result = invoke(*args, "--bank", HARBOR_BANK)
    assert result.output == (f"error: --bank {HARBOR_BANK}: one bank cannot serve 2 suites; leave --bank out so "
                             "each suite uses the bank its base + h* run used\n")
    assert page.read_text().count("82.3") == 2  # the card and the line beside the pooled mean


def test_several_suites_need_one_run_of_each_role(tmp_path: Path) -> None:
    runs = harbor_runs(tmp_path / "harbor")
    other = hand_run(tmp_path / "apps", "appworld_lite", {"x": [[NOTES]]})
    result = invoke("behaviors", "--base-h", runs["base_h"], "--base-h", other, "--base-hstar", runs["base_hstar"],
                    "--tuned", runs["tuned"])
    assert (result.exit_code, result.output) == (2, "error: suite 'appworld_lite': no --base-hstar or --tuned run; "
                                                    "every suite needs one run of each role\n")
    result = invoke("behaviors", "--base-h", runs["base_h"], "--base-h", runs["tuned"], "--base-hstar",
                    runs["base_hstar"], "--tuned", runs["tuned"])
    assert result.output == (f"error: --base-h {runs['tuned']}: a second run of suite 'harbor' (the first is "
                             f"{runs['base_h']}); give one run per role per suite\n")


def test_components_sharing_a_detector_are_one_behaviour() -> None:
    from unscaffold.behaviors.recovery import behaviours
    from unscaffold.detector_spec import DetectorSpec

    pages = DetectorSpec(description="every page read", predicate="pages_read")
    detectors = {"tool:fetch_all_pages": pages, "memory:first-page-only": pages.model_copy(update={
        "description": "told in other words"}), "check:doc": DetectorSpec(description="doc", predicate="doc_read"),
        "check:doc_first": DetectorSpec(description="doc first", predicate="doc_first")}
    assert behaviours(detectors) == {"tool:fetch_all_pages": ["tool:fetch_all_pages", "memory:first-page-only"],
                                     "check:doc": ["check:doc"], "check:doc_first": ["check:doc_first"]}


def test_trials_the_detectors_cannot_read_are_noted_and_show_nothing(tmp_path: Path) -> None:
    """A script that runs itself, a 5,000-term sum, a corrupt trajectory and a corrupt evidence file: the
    table is still made, those trials show no behaviour, and the notes say why."""
    cat, ls = "cat out.txt", "ls"
    selfrun = ["cat > x.sh <<'EOF'\nbash x.sh\nEOF", "bash x.sh", cat]
    deep = ["python3 -c 'x = " + "+".join(["1"] * 5000) + "; print(open(\"out.txt\").read())'"]
    runs = {"base_h": hand_run(tmp_path / "h", "harbor", {t: [[ls]] for t in "abcd"}),
            "base_hstar": hand_run(tmp_path / "hs", "harbor", {t: [[cat]] for t in "abcd"},
                                   harness=str(HARBOR_BANK)),
            "tuned": hand_run(tmp_path / "t", "harbor", {"a": [selfrun], "b": [deep], "c": [[cat]], "d": [[cat]]})}
    (runs["tuned"] / "trials" / "c__0" / "trajectory.json").write_text("{not json")
    (runs["tuned"] / "trials" / "d__0" / "evidence.jsonl").write_text("{not json\n")
    table = recovery_json(runs, "--min-eligible", "2")
    rows = {r["component"]: r for r in table["behaviors"]}
    # a and d still show the file (the self-running script is cut, the rest read; d falls back to its text)
    assert rows["tool:show_file"]["recovered_tasks"] == ["a", "d"]
    notes = [n for n in table["notes"] if n.startswith("tuned:")]
    assert len(notes) == 1 and notes[0].startswith("tuned: 4 thing(s) the detectors could not read, counted as not "
                                                   "shown: a__0: scripts run within scripts deeper than 4 levels "
                                                   "were not read; b__0: a program nested too deeply to parse "
                                                   "(RecursionError) was not read; c__0: trajectory not read (")
    assert notes[0].endswith("(and 1 more)")
