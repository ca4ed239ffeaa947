"""`compare` across the two recipes: the same cost columns for both (the distilled row with its collection),
the base model itself as the baseline, and marks for rows that are not alike or not trained."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tests.test_behaviors import HARBOR_BANK, hand_run, invoke
from unscaffold.cli import app
from unscaffold.iojson import write_json_atomic
from unscaffold.training_record import Rollouts, TrainingCost, TrainingRecord

TASKS = {"a": [["ls"]], "b": [["ls"]]}


def record(recipe: str, *, tasks: list[str], trained: bool = True, seed: int = 42, **cost: object) -> dict:
    return TrainingRecord(recipe=recipe, method="random" if recipe == "rescue" else None,  # type: ignore[arg-type]
                          base_model="tiny-wide", base_model_path="/cache/tiny-wide", suite="harbor",
                          train_tasks=tasks, evaluation={"max_turns": 40}, trained=trained, seed=seed,
                          not_trained_reason=None if trained else "no effective group: every group's rewards "
                          "were equal, so every advantage and every gradient was zero",
                          cost=TrainingCost.model_validate(cost)).model_dump(mode="json")


def sft_adapter(folder: Path, rec: dict) -> Path:
    folder.mkdir(parents=True)
    write_json_atomic(folder / "summary.json", {"steps": 400, "train_seconds": 12.0, "record": rec})
    return folder


def rescue_adapter(folder: Path, rec: dict) -> Path:
    (folder / "adapter").mkdir(parents=True)
    (folder / "metrics.jsonl").write_text(json.dumps({"step": 1, "rollouts": 8}) + "\n")
    write_json_atomic(folder / "summary.json", {"method": "random", "steps": 2, "wall_s": 3.0, "record": rec,
                                                "trained": rec["trained"]})
    return folder / "adapter"


def test_compare_ranks_against_the_base_model_and_marks_what_differs(tmp_path: Path) -> None:
    sft = sft_adapter(tmp_path / "sft", record(
        "sft", tasks=["t1", "t2"], rollouts=Rollouts(collection=8).model_dump(), reviewer_calls=40, replacements=16,
        reviewer_tokens={"input": 900, "output": 100}, optimiser_steps=400, cpu_s=30.0, wall_s=50.0))
    rescue = rescue_adapter(tmp_path / "rescue", record(
        "rescue", tasks=["t1", "t2"], trained=False, optimiser_steps=2, generation_batches=2,
        rollouts=Rollouts(base=8, rescue=8, filler=0, reanchor=3, validation=6).model_dump(), router_calls=5,
        router_tokens={"input": 50, "output": 5}, cpu_s=9.0, wall_s=4.0))
    other = rescue_adapter(tmp_path / "other", record("rescue", tasks=["t3"], optimiser_steps=2,
                                                      generation_batches=1))
    recorded = hand_run(tmp_path / "recorded", "harbor", TASKS, student="replay:student.json")
    base = hand_run(tmp_path / "base", "harbor", TASKS, student="hf:tiny-wide", rewards={"a": [0.0], "b": [1.0]})
    distilled = hand_run(tmp_path / "distilled", "harbor", TASKS, student=f"hf:tiny-wide+{sft}")
    rescued = hand_run(tmp_path / "rescued", "harbor", TASKS, student=f"hf:tiny-wide+{rescue}")
    elsewhere = hand_run(tmp_path / "elsewhere", "harbor", {"a": [["ls"], ["ls"]], "b": [["ls"], ["ls"]]},
                         student=f"hf:tiny-wide+{other}")
    result = invoke("compare", recorded, base, distilled, rescued, elsewhere, "--json")
    assert result.exit_code == 0, result.output
    cmp = json.loads(result.stdout)
    assert cmp["baseline"] == str(base)  # the base model itself, not the recorded student listed first
    rows = {Path(r["run"]).name: r for r in cmp["runs"]}
    assert rows["recorded"]["marks"] == ["other base model (replay:student.json; baseline hf:tiny-wide)"]
    assert rows["base"]["marks"] == [] and rows["distilled"]["marks"] == []
    assert rows["distilled"]["vs_baseline"]["diff"]["value"] == 50.0
    training = rows["distilled"]["cost"]["training"]
    assert (training["reviewer_calls"], training["replacements"], training["rollouts"]["collection"]) == (40, 16, 8)
    assert (rows["distilled"]["cost"]["rollouts"], rows["distilled"]["cost"]["training_steps"]) == (8, 400)
    assert (rows["rescued"]["ranked"], rows["rescued"]["vs_baseline"]) == (False, None)
    assert rows["rescued"]["marks"] == ["not trained: no effective group: every group's rewards were equal, so "
                                        "every advantage and every gradient was zero"]
    assert rows["rescued"]["cost"]["rollouts"] == 25 and rows["rescued"]["cost"]["training"]["router_calls"] == 5
    assert rows["elsewhere"]["marks"] == ["other train tasks (1 vs 2)", "other evaluation: trials 2 vs 1"]
    table = CliRunner().invoke(app, ["compare", *(str(p) for p in (recorded, base, distilled, rescued, elsewhere))],
                               env={"COLUMNS": "600"}).output
    assert "not trained" in table and "40 / 16" in table and "25 (0 / 8 / 8 / 0 / 3 / 6)" in table


def test_sft_record_counts_its_collection(tmp_path: Path) -> None:
    """train-sft's record: the collection runs build-sft read (its report beside the data) are its cost."""
    from unscaffold.run.models import RunResults
    from unscaffold.training_record import Clock, sft_record

    run = hand_run(tmp_path / "collect", "harbor", {"t1": [["ls"]], "t2": [["ls"], ["ls"]]},
                   extra={"reviewer_calls": 40, "replacements": 16, "tokens": {"reviewer": {"input": 7, "output": 3}},
                          "wall_time_s": 20.0})
    assert RunResults.model_validate_json((run / "results.json").read_text()).reviewer_calls == 40
    data = tmp_path / "sft.jsonl"
    data.write_text(json.dumps({"task_id": "t1", "messages": []}) + "\n")
    write_json_atomic(tmp_path / "sft.report.json", {"runs": [str(run)]})
    rec = sft_record(data, "tiny-wide", "/cache/tiny-wide", 400, 42, Clock(), changed=True)
    assert (rec.train_tasks, rec.trained, rec.suite, rec.notes) == (["t1", "t2"], True, "harbor", [])
    assert (rec.cost.rollouts.collection, rec.cost.reviewer_calls, rec.cost.replacements) == (3, 40, 16)
    assert (rec.cost.reviewer_tokens, rec.cost.optimiser_steps) == ({"input": 7, "output": 3}, 400)
    assert rec.evaluation["max_turns"] == 40 and rec.cost.wall_s >= 20.0
    still = sft_record(data, "tiny-wide", "/cache/tiny-wide", 400, 42, Clock(), changed=False)
    assert (still.trained, still.not_trained_reason) == (False, "no update moved the weights")
    (tmp_path / "sft.report.json").unlink()
    alone = sft_record(data, "tiny-wide", "/cache/tiny-wide", 4, 42, Clock(), changed=True)
    assert (alone.train_tasks, alone.notes) == (["t1"], ["sft.report.json not found beside the data: the "
                                                         "collection's cost is not counted"])


def test_published_rescue_figure_only_beside_its_own_setup() -> None:
    from unscaffold.behaviors.compare import PUBLISHED_SETUP, published_for
    from unscaffold.behaviors.labels import Training

    def training(method: str, suite: str, **evaluation: object) -> Training:
        rec = TrainingRecord.model_validate(record("rescue", tasks=["t"]))
        rec = rec.model_copy(update={"method": method, "suite": suite, "evaluation": evaluation})
        return Training(recipe="rescue", method=method, record=rec)

    shown, note = published_for(training("adaptive", "appworld", k=8, reanchor_every=10))
    assert (shown.method if shown else None, shown.setup if shown else None, note) == (
        "Harness-S (adaptive router)", PUBLISHED_SETUP, None)
    assert published_for(training("adaptive", "appworld", k=8, reanchor_every=0)) == (
        None, "the adaptive router was never re-anchored; the published one was")
    assert published_for(training("adaptive", "retrosynthesis", k=8, reanchor_every=10)) == (
        None, "trained on retrosynthesis, the published figure on AppWorld")
    assert published_for(training("none", "appworld", k=4)) == (None, "K = 4, the published K = 8")
    assert published_for(training("random", "appworld", k=8)) == (None, "no published figure for the random method")
    assert published_for(Training(recipe="rescue", method="same")) == (
        None, "no training record to check against the published setup")


def test_compare_averages_avg_and_pass_at_k_over_training_seeds(tmp_path: Path) -> None:
    """Three rescue runs that differ only in their training seed, each evaluated with three sampled trials
    per task: Avg@3 and Pass@3 per run, and their mean over the seeds with an interval."""
    rewards = [{"a": [1.0, 0.0, 0.0], "b": [0.0, 0.0, 0.0]},  # Avg@3 1/6, Pass@3 1/2
               {"a": [1.0, 1.0, 0.0], "b": [1.0, 0.0, 0.0]},  # Avg@3 1/2, Pass@3 1
               {"a": [1.0, 1.0, 1.0], "b": [0.0, 0.0, 0.0]}]  # Avg@3 1/2, Pass@3 1/2
    three = {"a": [["ls"]] * 3, "b": [["ls"]] * 3}
    base = hand_run(tmp_path / "base", "harbor", three, student="hf:tiny-wide?temperature=1",
                    rewards={"a": [0.0] * 3, "b": [0.0] * 3})
    runs = [base]
    for seed, r in zip((1, 2, 3), rewards, strict=True):
        adapter = rescue_adapter(tmp_path / f"rescue-{seed}", record("rescue", tasks=["t"], seed=seed,
                                                                     optimiser_steps=2))
        runs.append(hand_run(tmp_path / f"eval-{seed}", "harbor", three, rewards=r,
                             student=f"hf:tiny-wide+{adapter}?temperature=1"))
    result = invoke("compare", *runs, "--json")
    assert result.exit_code == 0, result.output
    cmp = json.loads(result.stdout)
    assert [r["k"] for r in cmp["runs"]] == [3, 3, 3, 3] and all(r["marks"] == [] for r in cmp["runs"])
    assert [round(r["scores"]["avg_at_k"]["value"], 2) for r in cmp["runs"]] == [0.0, 16.67, 50.0, 50.0]
    assert [r["scores"]["pass_at_k"]["value"] for r in cmp["runs"]] == [0.0, 50.0, 100.0, 50.0]
    [group] = cmp["seed_groups"]
    assert (group["label"], group["seeds"], group["k"]) == ("rescue-trained + h (random)", [1, 2, 3], 3)
    assert round(group["avg_at_k"]["value"], 2) == 38.89 and group["pass_at_k"]["value"] == 66.6667
    assert group["avg_at_k"]["low"] <= 16.67 and group["avg_at_k"]["high"] == 50.0
    table = CliRunner().invoke(app, ["compare", *(str(r) for r in runs)], env={"COLUMNS": "400"}).output
    assert "over training seeds" in table and "Avg@3 [95% CI]" in table and "Pass@3 [95% CI]" in table


def test_lora_moved_from_zero_or_from_a_warm_start() -> None:
    """A fresh adapter trained when its B matrices left zero; a warm start when they left where they started."""
    import torch

    from unscaffold.training_record import lora_b, lora_moved

    class Adapter(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lora_A, self.lora_B = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.zeros(2))

    fresh = Adapter()
    assert not lora_moved(fresh)
    fresh.lora_A.data += 1.0  # A alone moving changes nothing the adapter outputs while B is zero
    assert not lora_moved(fresh)
    fresh.lora_B.data += 1.0
    start = lora_b(fresh)
    assert lora_moved(fresh) and not lora_moved(fresh, start)
    fresh.lora_B.data[0] = 3.0
    assert lora_moved(fresh, start)


def test_recovery_pairs_the_recorded_students_when_the_base_model_itself_is_compared_too(tmp_path: Path) -> None:
    """The demo's layout: recorded students under h and h* (one file each), the base model itself under h,
    and a distilled model: recovery reads the recorded pair, the base model itself stays the baseline."""
    sft = sft_adapter(tmp_path / "sft", record("sft", tasks=["t1"], optimiser_steps=400))
    recorded = hand_run(tmp_path / "recorded", "harbor", TASKS, student="replay:student_h.json")
    recorded_hstar = hand_run(tmp_path / "recorded_hstar", "harbor", TASKS, student="replay:student_hstar.json",
                              harness=str(HARBOR_BANK))
    base = hand_run(tmp_path / "base", "harbor", TASKS, student="hf:tiny-wide")
    distilled = hand_run(tmp_path / "distilled", "harbor", TASKS, student=f"hf:tiny-wide+{sft}")
    result = invoke("compare", base, recorded, recorded_hstar, distilled, "--min-eligible", "1", "--json")
    assert result.exit_code == 0, result.output
    cmp = json.loads(result.stdout)
    assert cmp["baseline"] == str(base)
    assert [(t["runs"]["base_h"], t["runs"]["base_hstar"], t["runs"]["tuned"]) for t in cmp["recovery"]] == [
        (str(recorded), str(recorded_hstar), str(distilled))]
