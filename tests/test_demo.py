"""`unscaffold demo`: the whole pipeline offline, and the recorded students it ships."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import CHROMIUM, ROOT, needs_bwrap, rendered_dom
from unscaffold.suites import find

REPLAYS = ROOT / "examples" / "replay"


SHIPPED = ("demo_student_h.json", "demo_student_hstar.json", "demo_reviewer.json", "demo_tasks.json")
TRAIN = ["rxn-001", "rxn-002"]
TEST = ["rxn-003", "rxn-006"]
# what the shipped reviewer's two replacements show (a comparison of elements, rings and fragments; a canonical
# rewrite of answer.txt), and what no training row shows (templates, forward checks, stereo, protecting groups)
TAUGHT = {"tool:check_reactants", "check:stall", "check:answer_validated", "check:answer_valid",
          "check:justified_write", "check:reactant_coverage", "skill:filter-candidates", "skill:write-answer",
          "memory:counter-ions", "memory:reagents-not-reactants"}


def test_shipped_demo_replays_are_current(tmp_path: Path) -> None:
    """The recorded students and reviewer are generated from the suite's data: regenerate them when it changes."""
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_demo_replays.py"), str(tmp_path)], check=True,
                   cwd=ROOT, capture_output=True)
    assert {name: (tmp_path / name).read_text() for name in SHIPPED} == \
        {name: (REPLAYS / name).read_text() for name in SHIPPED}


def cli(*args: str, cwd: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "unscaffold.cli", *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@needs_bwrap
def test_training_rows_tell_never_taught_from_not_recovered(tmp_path: Path) -> None:
    """The shipped reviewer's rows carry ten h* behaviours; the recovery table counts each over the rows with
    the same detectors, and a behaviour no row shows reads `never taught`, not a failure to recover it."""
    from unscaffold.behaviors.recovery import recovery_table
    from unscaffold.behaviors.runs import load_run
    from unscaffold.behaviors.tables import behavior_grid, mean_lines, status
    from unscaffold.behaviors.taught import taught_counts
    from unscaffold.knowledge.bank import load_bank

    run = ["run", "retrosynthesis", "--concurrency", "2"]
    cli(*run, "--student", f"replay:{REPLAYS / 'demo_student_h.json'}", "--reviewer",
        f"replay:{REPLAYS / 'demo_reviewer.json'}", "--tasks", ",".join(TRAIN), "--out", "collect", cwd=tmp_path)
    cli("build-sft", "collect", "--out", "sft.jsonl", cwd=tmp_path)
    cli(*run, "--student", f"replay:{REPLAYS / 'demo_student_h.json'}", "--tasks", ",".join(TEST), "--out",
        "base_h", cwd=tmp_path)
    cli(*run, "--harness", "hstar", "--student", f"replay:{REPLAYS / 'demo_student_hstar.json'}", "--tasks",
        ",".join(TEST), "--out", "base_hstar", cwd=tmp_path)
    detectors = load_bank(find("retrosynthesis").bank).detectors()
    taught = taught_counts(tmp_path / "sft.jsonl", detectors)
    assert taught.rows == 2
    assert taught.counts == {c: 2 if c in TAUGHT else 0 for c in detectors}
    # the untrained student stands in for the tuned run: it recovers nothing, taught or not
    table = recovery_table(load_run(tmp_path / "base_h"), load_run(tmp_path / "base_hstar"),
                           load_run(tmp_path / "base_h"), min_eligible=1, taught=taught)
    rows = {r.component: r for r in table.behaviors}
    assert (rows["tool:retro_candidates"].eligible, rows["tool:retro_candidates"].taught) == (2, 0)
    assert status(rows["tool:retro_candidates"]) == "never taught"
    assert (rows["check:answer_validated"].eligible, rows["check:answer_validated"].taught) == (2, 2)
    assert status(rows["check:answer_validated"]) == "not recovered"
    headers, cells = behavior_grid(table.behaviors)
    assert headers[-2:] == ["training rows showing it", "status"]
    # a tool and the skill teaching it share a detector: one behaviour, one row naming both
    assert {r[1] for r in cells if r[-1] == "never taught"} == {"tool:retro_candidates, skill:enumerate-candidates",
                                                                "tool:forward_check, skill:verify-forward"}
    assert mean_lines(table)[-1].endswith("never taught (no row shows it): tool:retro_candidates, tool:forward_check, "
                                          "check:bounded_commands, check:malformed_candidate, "
                                          "skill:enumerate-candidates, skill:verify-forward, "
                                          "memory:protecting-groups, memory:stereo-lost")


def test_demo_tasks_split_as_stated() -> None:
    from unscaffold.benchmarks.retrosynthesis.suite import RetrosynthesisSuite

    tasks = json.loads((REPLAYS / "demo_tasks.json").read_text())
    suite = RetrosynthesisSuite()
    assert {t.id for t in suite.tasks("train")} >= set(tasks["train"]) and len(tasks["train"]) == 8
    assert {t.id for t in suite.tasks("test")} >= set(tasks["test"]) and len(tasks["test"]) == 6


@pytest.mark.slow
@pytest.mark.timeout(2700)  # the whole pipeline, rescue GRPO included, on a busy 2-core machine
@needs_bwrap
def test_the_demo_runs_the_whole_pipeline_offline(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    done = subprocess.run([sys.executable, "-m", "unscaffold.cli", "demo", "--out", str(out)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=2400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    pass_at_1 = {run: json.loads((out / run / "results.json").read_text())["pass_at_1"]
                 for run in ("base_h", "base_hstar", "collect", "tuned")}
    # the recorded students: half the test tasks wrong under h, all right under h*, all collected
    assert (pass_at_1["base_h"], pass_at_1["base_hstar"], pass_at_1["collect"]) == (50.0, 100.0, 100.0)
    report = json.loads((out / "sft.report.json").read_text())
    assert (report["kept"], report["replacements_kept"]) == (8, 16)  # every trial: two REPLACEs, kept
    assert json.loads((out / "adapter" / "summary.json").read_text())["steps"] == 400
    assert (out / "adapter" / "adapter_config.json").is_file()
    assert json.loads((out / "tuned" / "config.json").read_text())["student"] == {  # the typed spec
        "kind": "hf", "target": "tiny-wide", "adapter": str(out / "adapter"),
        "sampling": {"temperature": None, "top_p": None, "max_tokens": 320, "seed": None}}
    simulated = json.loads((out / "rescue_simulate.json").read_text())
    methods = simulated["methods"]
    assert list(methods) == ["grpo", "same_harness", "random", "rule", "adaptive"]
    assert all({"effective_group_rate", "rescue_success_rate", "extra_rollout_pct"} <= set(m) for m in methods.values())
    assert methods["adaptive"]["effective_group_rate"] > methods["same_harness"]["effective_group_rate"] \
        > methods["grpo"]["effective_group_rate"]  # the published ordering, with the default knobs
    # both recipes on one suite from one base model: the rescue GRPO trained on the same train tasks...
    lines = [json.loads(line) for line in (out / "rescue" / "metrics.jsonl").read_text().splitlines()]
    assert [(m["step"], m["groups"]) for m in lines] == [(i, 1) for i in range(1, 11)]  # 20 steps, 2 per batch
    assert json.loads((out / "rescue" / "config.json").read_text())["task_ids"] == json.loads(
        (REPLAYS / "demo_tasks.json").read_text())["train"]
    # the warm-started rescue run trained (some group mixed a success and a failure), and its adapter moved
    summary = json.loads((out / "rescue" / "summary.json").read_text())
    assert (summary["steps"], summary["trained"]) == (20, True), summary["not_trained_reason"]
    from safetensors.torch import load_file

    warm = load_file(str(out / "adapter_warm" / "adapter_model.safetensors"))
    tuned = load_file(str(out / "rescue" / "adapter" / "adapter_model.safetensors"))
    assert any(float(t.abs().sum()) > 0 for n, t in tuned.items() if "lora_B" in n)
    assert any(float((tuned[n] - warm[n]).abs().sum()) > 0 for n in warm)  # rescue GRPO moved the warm start
    # ...and every row is evaluated on the same test tasks, each labelled from its own records
    cmp = json.loads((out / "compare.json").read_text())
    assert [r["label"] for r in cmp["runs"]] == ["base + h (base_model_h)", "base + h (base_h)", "base + h*",
                                                 "distilled + h", "rescue-trained + h",
                                                 "rescue-trained + routed (random, trained)"]
    assert cmp["suite"] == "retrosynthesis" and {r["n_tasks"] for r in cmp["runs"]} == {6}
    assert cmp["baseline"] == str(out / "base_model_h")  # the base model itself, not the recorded students
    assert [bool(r["marks"]) for r in cmp["runs"]] == [False, True, True, False, False, False]
    costs = [r["cost"] for r in cmp["runs"]]
    assert [(c["training_steps"], c["training_method"]) for c in costs] == [
        (None, None), (None, None), (None, None), (400, None), (400, "random"), (400, "random")]  # 380 + 20
    assert [c["reviewer_calls"] for c in costs] == [0] * 6  # evaluations: no reviewer anywhere
    distilled_cost, rescue_cost = costs[3]["training"], costs[4]["training"]
    assert (distilled_cost["reviewer_calls"], distilled_cost["rollouts"]["collection"]) == (
        json.loads((out / "collect" / "results.json").read_text())["reviewer_calls"], 8)
    assert rescue_cost["reviewer_calls"] == distilled_cost["reviewer_calls"]  # its warm start's collection
    assert rescue_cost["rollouts"]["base"] == 40 and rescue_cost["generation_batches"] == 10
    assert [(m["method"], m["published"]) for m in cmp["rescue_methods"]] == [("random", None), ("random", None)]
    routed = json.loads((out / "routed" / "results.json").read_text())
    assert set(routed["harness_per_task"]) == set(json.loads((REPLAYS / "demo_tasks.json").read_text())["test"])
    for page in ("compare.html", "behaviors.html", "collect/report.html", "rescue/metrics.html"):
        assert (out / page).stat().st_size > 1000
    shown = " ".join(done.stdout.split())
    assert "the effect in miniature, not a result" in shown and "unscaffold demo --student openai:" in shown
    assert "SFT settings of the tiny model (tiny-wide) beside the published recipe" in shown
    # the distilled tiny model, from its own greedy generations under h, repeats what its rows taught...
    distilled = next(t for t in cmp["recovery"] if t["runs"]["tuned"] == str(out / "tuned"))
    rows = {r["component"]: r for r in distilled["behaviors"]}
    assert distilled["taught"]["rows"] == 8
    # (measured 2026-12-03 under the protocol-only prompt and evidence-based detectors: four taught behaviours,
    # each on one of six tasks)
    recovered = {c for c, r in rows.items() if r["recovered"]}
    assert len(recovered) >= 3 and all(rows[c]["taught"] > 0 for c in recovered), rows
    # ...and nothing its rows never showed
    never = {c for c, r in rows.items() if r["taught"] == 0}
    assert {"tool:retro_candidates", "tool:forward_check"} <= never and not any(rows[c]["recovered"] for c in never)
    rescued = next(t for t in cmp["recovery"] if t["runs"]["tuned"] == str(out / "rescue_h"))
    assert rescued["taught"] is None and {r["component"] for r in rescued["behaviors"]} == set(rows)
    # the same pipeline without the SFT step (the base tiny model under h, the comparison's baseline) recovers
    # nothing
    table = subprocess.run([sys.executable, "-m", "unscaffold.cli", "behaviors", "--base-h", str(out / "base_h"),
                            "--base-hstar", str(out / "base_hstar"), "--tuned", str(out / "base_model_h"),
                            "--min-eligible", "1", "--taught", str(out / "sft.jsonl"), "--json"],
                           capture_output=True, text=True, check=True)
    untrained = json.loads(table.stdout)["behaviors"]
    assert {r["component"] for r in untrained} == set(rows) and sum(r["recovered"] for r in untrained) == 0
    if CHROMIUM:
        dom = rendered_dom(out / "compare.html", "", tmp_path)
        assert "distilled + h" in dom and "base + h*" in dom and "rescue-trained + h" in dom
    # rerunning resumes: every step finished with the same command and inputs is skipped, nothing is redone
    again = subprocess.run([sys.executable, "-m", "unscaffold.cli", "demo", "--out", str(out)], cwd=tmp_path,
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    assert " ".join(again.stdout.split()).count("inputs and command unchanged: skipped") == 16
    # ...and an interrupted SFT step restarts clean instead of refusing its half-written folder
    state = json.loads((out / "state.json").read_text())
    del state["stages"]["train-sft"]
    (out / "state.json").write_text(json.dumps(state))
    resumed = subprocess.run([sys.executable, "-m", "unscaffold.cli", "demo", "--out", str(out)], cwd=tmp_path,
                             capture_output=True, text=True, timeout=1200)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    assert json.loads((out / "adapter" / "summary.json").read_text())["steps"] == 400
