"""train-sft in two processes (gloo on CPUs) through `accelerate launch`: the multi-process path really runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures_tiny import tiny_model_dir  # noqa: F401  (pytest fixture)
from sft_rows import overfit_rows, write_rows

from unscaffold.sft.data import prepare, read_rows


@pytest.mark.slow
def test_two_process_cpu_run(tiny_model_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    from transformers import AutoTokenizer

    data = write_rows(tmp_path / "data.jsonl", overfit_rows(16))
    accelerate = Path(sys.executable).with_name("accelerate")
    command = [str(accelerate), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
               "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
               "-m", "unscaffold.cli", "train-sft", str(data), "--model", str(tiny_model_dir), "--max-steps", "2",
               "--no-gradient-checkpointing", "--out", str(tmp_path / "run")]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["world_size"], summary["gradient_accumulation_steps"], summary["steps"]) == (2, 4, 2)
    # 2 steps x batch 8 = every row once, counted over both processes
    samples = prepare(read_rows(data), AutoTokenizer.from_pretrained(tiny_model_dir), max_length=65536,
                      split_turns=False).samples
    assert summary["trained_tokens"] == sum(s.trained_tokens for s in samples)
    assert [json.loads(x)["step"] for x in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()] == [1, 2]
    assert (tmp_path / "run" / "adapter_model.safetensors").is_file()


@pytest.mark.slow
def test_gpu_benchmark_runs_its_cpu_smoke_mode() -> None:
    script = Path(__file__).resolve().parent.parent / "perf" / "sft_gpu.py"
    done = subprocess.run([sys.executable, str(script), "--smoke", "--json"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["device"] == "cpu" and [r["length"] for r in report["results"]] == [128, 256]
    assert all(r["tokens_per_s"] > 0 for r in report["results"]) and 0 < report["trainable"] < report["parameters"]
