"""The recipe's data-source ablation, offline on the built-in chemistry suite: rows from h* runs of any
student, from a gold-reading reviewer, from an empty K, each labelled with its source; the published
figures beside a distilled run of one source in `compare`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import reviewer_helpers as rv
from tests.helpers import needs_bwrap
from tests.test_reviewer_kinds import ScriptedModel, submit
from unscaffold.behaviors.compare import PUBLISHED_ABLATION, Comparison, Cost, RunRow, ablation
from unscaffold.behaviors.labels import RunLabel, Training
from unscaffold.behaviors.stats import Interval
from unscaffold.behaviors.tables import ablation_grid
from unscaffold.errors import InputError
from unscaffold.reviewer.hook import ReviewHook
from unscaffold.reviewer.llm import LLMReviewer
from unscaffold.run.folder import RunFolder
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run
from unscaffold.sft.build import build_sft

TASK = "rxn-001"
ORACLE = "printf '%s\\n' 'CC(=O)Cl.Nc1ccccc1' > answer.txt"  # not this task's: only that it reaches the prompt


GOLD = "BrCc1ccccc1.CCOC(=O)C1CCNCC1"  # the task's recorded reactants


def collect(root: Path, name: str, student: str = "oracle", **options) -> Path:
    out = root / name
    summary = run(RunConfig(suite="retrosynthesis", student=student, task_ids=[TASK], out=out, **options))
    assert summary.per_task == {TASK: 1.0}, name
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ablation")
    # any student under h*: here one that calls the bank's own tool, which h does not have
    replay = root / "hstar_student.json"
    replay.write_text(json.dumps({TASK: [
        {"reasoning": "I check and write the reactants.",
         "tool_call": {"name": "check_reactants", "arguments": {"smiles": GOLD, "write_to": "answer.txt"}}},
        {"content": f"The reactants are {GOLD}."}]}))
    return {
        "reviewer_k": collect(root, "k", reviewer="passthrough"),
        "empty_k": collect(root, "empty", reviewer="passthrough", empty_k=True),
        "gold_reviewer": collect(root, "gold", reviewer="passthrough", reviewer_reads_gold=True),
        "hstar": collect(root, "hstar", f"replay:{replay}", harness="hstar"),
        "unreviewed": collect(root, "plain"),
    }


@needs_bwrap
def test_each_source_builds_rows_labelled_by_it(runs: dict[str, Path], tmp_path: Path) -> None:
    assert RunFolder(runs["reviewer_k"]).knowledge.is_file()
    assert not RunFolder(runs["empty_k"]).knowledge.exists()  # the reviewer worked without K
    for source, folder in runs.items():
        report = build_sft([folder], tmp_path / f"{source}.jsonl", include_hstar=True)
        assert (report.kept, report.sources) == (1, {source: 1}), source
        [row] = [json.loads(line) for line in (tmp_path / f"{source}.jsonl").read_text().splitlines()]
        assert row["source"] == source
    hstar_row = json.loads((tmp_path / "hstar.jsonl").read_text())  # as it happened: the bank's tool is a target
    assert hstar_row["messages"][2]["tool_calls"][0]["function"]["name"] == "check_reactants"
    assert "check_reactants" in {t["function"]["name"] for t in hstar_row["tools"]}
    assert "context_turns" not in hstar_row
    plain = build_sft([runs["hstar"]], tmp_path / "default.jsonl")  # not without the ablation option
    assert (plain.kept, plain.dropped) == (0, {"not_deployment_harness": 1})
    mixed = build_sft(list(runs.values()), tmp_path / "all.jsonl", include_hstar=True)
    assert mixed.sources == {s: 1 for s in runs}


def test_the_gold_reaches_the_reviewer_only_when_asked(tmp_path: Path) -> None:
    for gold in (ORACLE, None):
        model = ScriptedModel([submit("s1", rv.passes())])
        hook = ReviewHook(LLMReviewer(model), None, 5, tmp_path / f"{gold is None}.jsonl", "t-0", "t", gold=gold)
        hook(rv.transcript(rv.TASK, "ls"), rv.proposal("ls"))
        prompt = model.sent[0][0][1].content
        section = f"# Reference solution of this task (gold answer)\n```bash\n{ORACLE}\n```"
        assert (section in prompt) is (gold is not None)


def test_ablation_options_need_a_reviewer(tmp_path: Path) -> None:
    from unscaffold.benchmarks import load_suite
    from unscaffold.run.setup import trial_context

    suite = load_suite("retrosynthesis")
    for options, message in (({"empty_k": True}, "--empty-k: an option of the reviewer: pass --reviewer too"),
                             ({"reviewer_reads_gold": True},
                              "--reviewer-reads-gold: an option of the reviewer: pass --reviewer too")):
        with pytest.raises(InputError) as err:
            trial_context(suite, RunConfig(suite="retrosynthesis", student="oracle", out=tmp_path, **options))
        assert str(err.value) == message


def distilled(label: str, sources: dict[str, int], value: float) -> RunRow:
    what = RunLabel(kind="distilled", model="hf:base", adapter="a", harness="h",
                    training=Training(recipe="sft", data_sources=sources))
    return RunRow(run=label, label=label, what=what, student="hf:base+a", n_tasks=10, n_trials=10,
                  scores={"pass_at_1": Interval(value=value, low=0.0, high=100.0)}, vs_baseline=None,
                  cost=Cost(student_calls=10, student_tokens={}, reviewer_calls=0, reviewer_tokens={}, cost_usd=0.0,
                            wall_time_s=1.0, trial_wall_s=1.0, student_rollouts=10))


def test_compare_prints_the_published_figure_beside_a_single_source_run() -> None:
    rows = [distilled("gold", {"gold_reviewer": 40}, 20.0), distilled("hstar", {"hstar": 40}, 10.0),
            distilled("mixed", {"hstar": 10, "reviewer_k": 30}, 30.0)]
    found = ablation(rows, "retrosynthesis")
    assert [(a.run, a.source, a.published) for a in found] == [
        ("gold", "gold_reviewer", [("reviewer that reads the gold answer", 15.0)]),
        ("hstar", "hstar", [("strong model with h*", 3.0), ("student with h*", 12.0)])]
    assert ablation(rows, "spreadsheet") == []  # the ablation was published for chemistry only
    cmp = Comparison(suite="retrosynthesis", split="test", n_tasks=10, baseline="gold", seed=0, runs=rows,
                     recovery_note="", ablation=found)
    assert ablation_grid(cmp) == (["run", "rows from", "pass@1", "published"], [
        ["gold", "gold_reviewer", "20.0", "reviewer that reads the gold answer 15.0"],
        ["hstar", "hstar", "10.0", "strong model with h* 3.0; student with h* 12.0"]])
    assert {v for figures in PUBLISHED_ABLATION.values() for _, v in figures} == {30.0, 11.0, 15.0, 3.0, 12.0}


def test_the_gold_reviewer_needs_a_reference_solution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from unscaffold.benchmarks import load_suite
    from unscaffold.run.setup import trial_context

    suite = load_suite("retrosynthesis")

    def no_oracle(task: object) -> list[str]:
        raise InputError("--student", None, "this suite has no oracle")

    monkeypatch.setattr(suite, "oracle_commands", no_oracle)
    config = RunConfig(suite="retrosynthesis", student="oracle", out=tmp_path, task_ids=[TASK],
                       reviewer="passthrough", reviewer_reads_gold=True)
    with pytest.raises(InputError) as err:
        trial_context(suite, config)
    assert str(err.value) == "--reviewer-reads-gold: no reference solution to read: this suite has no oracle"
