"""Rescue GRPO over several processes: the rescue plan per rank, and a two-process CPU (gloo) run of the
deterministic toy (tests/rescue_toy.py) that must give the one-process counts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import needs_bwrap
from tests.test_rescue_train import _write
from unscaffold.benchmarks import load_suite
from unscaffold.rescue.trl_rescue import plan_rescue

ROOT = Path(__file__).resolve().parent.parent
COUNTS = ("step", "groups", "rescued_groups", "rollouts", "grpo_rollouts", "extra_rollout_pct", "effective_group_rate",
          "base_effective_group_rate", "rescue_success_rate", "rescue_harnesses", "method")


def test_each_rank_resamples_the_failed_rows_it_holds() -> None:
    """12 rows of K = 4 on two ranks of 6: group 1 sits on both, so each rank re-samples its two rows;
    a failed group held by one rank alone makes the other sample fillers, one share per rank."""
    split = plan_rescue([1], k=4, local_rows=6, world=2)
    assert (split.rows, split.share) == ([[4, 5], [6, 7]], 2)
    alone = plan_rescue([0], k=4, local_rows=6, world=2)
    assert (alone.rows, alone.share) == ([[0, 1, 2, 3], []], 4)
    every = plan_rescue([0, 1, 2], k=4, local_rows=6, world=2)
    assert (every.rows, every.share) == ([[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]], 6)
    one = plan_rescue([1], k=4, local_rows=12, world=1)
    assert (one.rows, one.share) == ([[4, 5, 6, 7]], 4)
    assert plan_rescue([], k=4, local_rows=6, world=2).share == 0


def one_and_two_processes(tmp_path: Path, tasks: list[str], base_passes: list[str]) -> dict[str, list[dict]]:
    """The toy run in one process, then under `accelerate launch` with two (gloo on CPUs): each run's
    metrics.jsonl counts; the summaries agree and name their number of processes."""
    table = tmp_path / "table.json"  # the rule router ranks docs-first, then submit-guard, for every task
    table.write_text(json.dumps({"tasks": [{"task_id": "v", "text": "any", "rewards": {
        "base": [0.0], "docs-first": [1.0], "submit-guard": [0.5]}}]}))
    common = ["rescue", "train", "appworld_lite", "--model", "tiny", "--pool", str(_write(tmp_path)), "--router",
              "rule", "--validation", str(table), "--tasks", ",".join(tasks), "--max-steps", "2", "--k", "2",
              "--tasks-per-step", str(len(tasks)), "--steps-per-generation", "1", "--max-completion-length", "12"]
    toy = str(ROOT / "tests" / "rescue_toy.py")
    env = {**os.environ, "UNSCAFFOLD_CACHE": str(tmp_path / "cache"), "CUDA_VISIBLE_DEVICES": "",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "RESCUE_TOY_BASE_PASSES": ",".join(base_passes)}
    one = subprocess.run([sys.executable, toy, *common, "--out", str(tmp_path / "one")], capture_output=True,
                         text=True, timeout=900, env=env)
    assert one.returncode == 0, one.stderr[-3000:]
    accelerate = Path(sys.executable).with_name("accelerate")
    two = subprocess.run([str(accelerate), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                          "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0", toy,
                          *common, "--out", str(tmp_path / "two")], capture_output=True, text=True, timeout=900,
                         env=env)
    assert two.returncode == 0, two.stderr[-3000:]
    assert two.stdout.count("rescue GRPO on appworld_lite") == 1  # one report, from the main process
    trl_log = [json.loads(line) for line in (tmp_path / "two" / "trl_log.jsonl").read_text().splitlines()]
    assert [line["step"] for line in trl_log] == [1, 2]  # the main process alone writes the records
    assert (tmp_path / "two" / "adapter" / "adapter_model.safetensors").is_file()
    summaries = {name: json.loads((tmp_path / name / "summary.json").read_text()) for name in ("one", "two")}
    assert (summaries["one"]["world_size"], summaries["two"]["world_size"]) == (1, 2)
    for key in ("steps", "rescued_groups", "rollouts", "extra_rollout_pct", "effective_group_rate", "method"):
        assert summaries["two"][key] == summaries["one"][key], key
    runs = {name: [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
            for name in ("one", "two")}
    return {name: [{key: line[key] for key in COUNTS} for line in lines] for name, lines in runs.items()}


@pytest.mark.slow
@needs_bwrap
def test_two_processes_give_the_one_process_counts(tmp_path: Path) -> None:
    """Three tasks of K = 2 on two ranks of three rows: the middle group is split over the ranks. Every
    base group fails, every rescue group (the rule router's docs-first, submit-guard) is effective."""
    tasks = [t.id for t in load_suite("appworld_lite").tasks("train")[:3]]
    counts = one_and_two_processes(tmp_path, tasks, base_passes=[])
    assert counts["two"] == counts["one"]
    assert [(c["groups"], c["rescued_groups"], c["rollouts"], c["extra_rollout_pct"], c["effective_group_rate"])
            for c in counts["one"]] == [(3, 3, 12, 100.0, 1.0)] * 2
    assert counts["one"][0]["rescue_harnesses"] == ["docs-first", "submit-guard"] * 3


@pytest.mark.slow
@needs_bwrap
def test_a_rank_without_failed_rows_samples_fillers(tmp_path: Path) -> None:
    """Two tasks of K = 2 on two ranks of two rows, one task solved under the base harness: one rank holds
    the failed group and re-samples it, the other samples fillers that never train; the counts are the
    one-process counts."""
    tasks = [t.id for t in load_suite("appworld_lite").tasks("train")[:2]]
    counts = one_and_two_processes(tmp_path, tasks, base_passes=tasks[:1])
    assert counts["two"] == counts["one"]
    assert [(c["groups"], c["rescued_groups"], c["rollouts"], c["extra_rollout_pct"], c["effective_group_rate"])
            for c in counts["one"]] == [(2, 1, 6, 50.0, 0.5)] * 2
    assert counts["one"][0]["rescue_harnesses"] == ["docs-first", "submit-guard"]


def test_the_generation_batch_must_split_evenly_over_the_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    from unscaffold.errors import InputError
    from unscaffold.rescue.train import RescueTrainConfig, check_options

    monkeypatch.setenv("WORLD_SIZE", "2")  # as accelerate launch --num_processes 2 sets it
    fits = RescueTrainConfig(suite="appworld_lite", model="tiny", out=Path("/unused"), k=2, tasks_per_step=3,
                             steps_per_generation=1)
    check_options(fits)  # 6 rollouts, 3 a process
    odd = fits.model_copy(update={"k": 3, "tasks_per_step": 1})
    with pytest.raises(InputError) as err:
        check_options(odd)
    assert str(err.value) == ("--steps-per-generation: 1 x 2 processes does not divide the 3 rollouts of a "
                              "generation batch (K 3 x 1 tasks)")
