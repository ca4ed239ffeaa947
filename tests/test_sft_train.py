"""train-sft on the tiny model: it learns, writes the contract's files, resumes, loads under hf:, merges."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from sft_rows import TOOLS, overfit_rows, prompt_completion_format, trl_format, write_rows
from typer.testing import CliRunner

from unscaffold.cli import app
from unscaffold.errors import InputError
from unscaffold.llm.types import Message
from unscaffold.offline.tiny import build_tiny_model
from unscaffold.sft.config import FIELDS, TrainConfig, gradient_accumulation, resolve_config
from unscaffold.sft.data import prepare, read_rows
from unscaffold.sft.train import train_sft

STEPS = 8  # batch 8 over 16 rows: 4 epochs
OVERFIT_FRACTION = 0.5  # the final loss must be below half the first


@pytest.fixture(scope="module")
def learnable_tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with a wider initialisation, so a LoRA adapter can move its loss far (see tiny.py)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "wide", init_std=0.2)


def quick_config(model: Path, **changes: Any) -> TrainConfig:
    values: dict[str, Any] = dict(model=str(model), max_steps=STEPS, learning_rate=1e-2, per_device_batch_size=8,
                                  gradient_checkpointing=False, warmup_ratio=0.0, save_steps=4)
    return TrainConfig(**{**values, **changes})


@pytest.fixture(scope="module")
def trained(learnable_tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("sft")
    data = write_rows(root / "data.jsonl", overfit_rows(16))
    train_sft(data, root / "run", quick_config(learnable_tiny), progress=False)
    return data, root / "run"


def log_lines(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "train_log.jsonl").read_text().splitlines()]


def test_tiny_model_overfits_16_rows_and_writes_the_run_folder(trained: tuple[Path, Path],
                                                                 learnable_tiny: Path) -> None:
    data, run = trained
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == STEPS
    assert summary["final_loss"] < OVERFIT_FRACTION * summary["first_loss"]
    from transformers import AutoTokenizer

    samples = prepare(read_rows(data), AutoTokenizer.from_pretrained(learnable_tiny), max_length=65536,
                      split_turns=False).samples
    assert summary["trained_tokens"] == 4 * sum(s.trained_tokens for s in samples)  # exactly 4 epochs of targets
    assert summary["rows"] == summary["rows_used"] == summary["samples"] == 16 and summary["rows_dropped"] == {}
    assert summary["tokens_per_s"] > 0 and summary["peak_memory_gb"] > 0
    assert summary["peak_memory_kind"] == "cpu_rss" and summary["gradient_accumulation_steps"] == 1
    record = summary["record"]  # the units rescue train records too; no build-sft report: no collection cost
    assert (record["recipe"], record["trained"], record["cost"]["optimiser_steps"]) == ("sft", True, STEPS)
    assert record["cost"]["rollouts"]["collection"] == 0 and record["notes"] == [
        "data.report.json not found beside the data: the collection's cost is not counted"]
    lines = log_lines(run)
    assert [x["step"] for x in lines] == list(range(1, STEPS + 1))
    assert all({"loss", "lr", "trained_tokens"} <= x.keys() for x in lines)
    assert lines[-1]["trained_tokens"] == summary["trained_tokens"] and lines[-1]["loss"] == summary["final_loss"]
    config = json.loads((run / "train_config.json").read_text())
    assert config["lora_r"] == 32 and config["lora_alpha"] == 32 and config["resolved"]["world_size"] == 1
    adapter = json.loads((run / "adapter_config.json").read_text())
    assert adapter["r"] == 32 and adapter["lora_alpha"] == 32
    assert {name.rsplit(".", 1)[-1] for name in adapter["target_modules"]} == {
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert (run / "adapter_model.safetensors").is_file()
    assert (run / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (run / "checkpoints").glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-8"]


def test_resume_gives_the_same_steps_and_losses(trained: tuple[Path, Path], tmp_path: Path,
                                                learnable_tiny: Path) -> None:
    data, run = trained
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    shutil.rmtree(copy / "checkpoints" / "checkpoint-8")
    (copy / "summary.json").unlink()
    with pytest.raises(InputError, match="holds a training run already; pass --resume"):
        train_sft(data, copy, quick_config(learnable_tiny), progress=False)
    with pytest.raises(InputError) as err:
        train_sft(data, copy, quick_config(learnable_tiny, lora_r=8), resume=True, progress=False)
    assert str(err.value) == f"{copy / 'train_config.json'}: lora_r: --resume with 8, but the run started with 32"
    train_sft(data, copy, quick_config(learnable_tiny), resume=True, progress=False)
    summary = json.loads((copy / "summary.json").read_text())
    original = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == STEPS and summary["resumed_from_step"] == 4
    assert summary["trained_tokens"] == original["trained_tokens"]
    resumed, first = log_lines(copy), log_lines(run)
    assert [x["step"] for x in resumed] == list(range(1, STEPS + 1))
    assert [x["trained_tokens"] for x in resumed] == [x["trained_tokens"] for x in first]
    assert [x["loss"] for x in resumed] == pytest.approx([x["loss"] for x in first], rel=1e-4)


def test_the_adapter_loads_under_hf_and_merges(trained: tuple[Path, Path], learnable_tiny: Path,
                                              tmp_path: Path) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from unscaffold.llm.hf_backend import HFModel
    from unscaffold.specs import ModelSpec

    _, run = trained
    spec = ModelSpec.parse(f"hf:{learnable_tiny}+{run}")
    model = HFModel(str(spec), spec.target, adapter=spec.adapter, max_new_tokens=8, device="cpu")
    response = model.complete([Message(role="user", content="Write 3 to answer.txt")], TOOLS)
    loaded: Any = model._model
    assert isinstance(loaded, PeftModel) and response.usage.output_tokens >= 1
    result = CliRunner().invoke(app, ["merge", str(run), "--out", str(tmp_path / "merged")])
    assert result.exit_code == 0, result.output
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        assert torch.allclose(merged(ids).logits, loaded(input_ids=ids).logits, atol=1e-4)
    again = CliRunner().invoke(app, ["merge", str(run), "--out", str(tmp_path / "merged")])
    assert again.exit_code == 2
    assert again.output == f"error: {tmp_path / 'merged'}: exists and is not empty; choose another --out\n"


def test_cli_reads_the_config_file_and_flags_override(learnable_tiny: Path, tmp_path: Path) -> None:
    data = write_rows(tmp_path / "data.jsonl", overfit_rows(4))
    (tmp_path / "c.toml").write_text(f'model = "{learnable_tiny}"\nlora_r = 4\nlora_alpha = 8\nbatch_size = 2\n'
                                     "per_device_batch_size = 2\nmax_steps = 5\nlr_scheduler = \"linear_to_min_lr\"\n"
                                     "[trl]\nadam_beta2 = 0.9\noptim = \"adamw_torch\"\n")
    args = ["train-sft", str(data), "--out", str(tmp_path / "run"), "--config", str(tmp_path / "c.toml"),
            "--max-steps", "3", "--no-gradient-checkpointing", "--trl", "adam_beta2=0.95", "--peft",
            "use_rslora=true"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    config = json.loads((tmp_path / "run" / "train_config.json").read_text())
    assert (config["lora_r"], config["lora_alpha"], config["max_steps"], config["gradient_checkpointing"]) == (
        4, 8, 3, False)
    passed = {"--trl": {"adam_beta2": 0.95, "optim": "adamw_torch"}, "--peft": {"use_rslora": True}}
    assert (config["trl"], config["peft"]) == (passed["--trl"], passed["--peft"])  # the file's table, the flag won
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["record"]["passed_through"] == passed
    # linear decay to the floor after one warm-up step (5% of 3 steps, rounded up): the lr each step used
    floor = 1e-6 / 2e-4
    assert [x["lr"] for x in log_lines(tmp_path / "run")] == pytest.approx(
        [0.0, 2e-4, 2e-4 * (floor + (1 - floor) * 0.5)])
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 2
    assert again.output == (f"error: {tmp_path / 'run'}: holds a training run already; pass --resume or choose "
                            "another --out\n")


def test_every_setting_is_a_flag_and_a_file_key(tmp_path: Path) -> None:
    import typer.main

    command = typer.main.get_command(app).commands["train-sft"]  # type: ignore[attr-defined]
    flags = {p.name for p in command.params}
    assert set(FIELDS) <= flags
    defaults = TrainConfig()
    assert (defaults.lora_r, defaults.lora_alpha, defaults.target_modules, defaults.learning_rate,
            defaults.warmup_ratio, defaults.min_lr, defaults.epochs, defaults.batch_size, defaults.max_length,
            defaults.seed) == (32, 32, "all-linear", 2e-4, 0.05, 1e-6, 2.0, 8, 65536, 42)
    (tmp_path / "c.yaml").write_text("train_sft:\n  lora-r: 16\n  epochs: 1\n")
    assert resolve_config(tmp_path / "c.yaml", {"epochs": 3.0, "seed": None}).model_dump() == {
        **defaults.model_dump(), "lora_r": 16, "epochs": 3.0}
    (tmp_path / "bad.toml").write_text("lora_rank = 8\n")
    with pytest.raises(InputError) as err:
        resolve_config(tmp_path / "bad.toml", {})
    assert str(err.value) == f"{tmp_path / 'bad.toml'}: lora_rank: Extra inputs are not permitted"


def test_gradient_accumulation_follows_the_device_count() -> None:
    config = TrainConfig()
    assert [gradient_accumulation(config, n) for n in (1, 2, 4, 8)] == [8, 4, 2, 1]
    with pytest.raises(InputError) as err:
        gradient_accumulation(config, 3)
    assert str(err.value) == "train-sft: batch_size: 8 is not a multiple of per_device_batch_size 1 x 3 devices"


def test_trl_format_rows_train_like_build_sft_rows(learnable_tiny: Path, tmp_path: Path) -> None:
    """No call ids, arguments as JSON strings, reasoning under `reasoning`: the same samples, the same losses."""
    rows = overfit_rows(4)
    ours = write_rows(tmp_path / "ours.jsonl", rows)
    theirs = write_rows(tmp_path / "trl.jsonl", [trl_format(r) for r in rows])
    assert "tool_call_id" not in theirs.read_text() and '"id"' not in theirs.read_text()
    config = quick_config(learnable_tiny, max_steps=2, per_device_batch_size=4, save_steps=10)
    train_sft(ours, tmp_path / "ours", config, progress=False)
    split = write_rows(tmp_path / "pc.jsonl", [prompt_completion_format(r) for r in rows])
    train_sft(theirs, tmp_path / "trl", config, progress=False)
    train_sft(split, tmp_path / "pc", config, progress=False)
    first, second, third = (json.loads((tmp_path / run / "summary.json").read_text()) for run in ("ours", "trl", "pc"))
    assert (second["rows_used"], second["samples"], second["rows_dropped"]) == (4, 4, {})
    assert (third["rows_used"], third["samples"], third["rows_dropped"]) == (4, 4, {})
    assert second["trained_tokens"] == first["trained_tokens"] == third["trained_tokens"]
    losses = [x["loss"] for x in log_lines(tmp_path / "ours")]
    assert [x["loss"] for x in log_lines(tmp_path / "trl")] == losses
    assert [x["loss"] for x in log_lines(tmp_path / "pc")] == losses


def test_without_a_terminal_training_prints_progress_lines(learnable_tiny: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A log gets the first and the last step (and one line every 30 s between) instead of a silent bar."""
    data = write_rows(tmp_path / "data.jsonl", overfit_rows(4))
    train_sft(data, tmp_path / "run", quick_config(learnable_tiny, max_steps=3, per_device_batch_size=2),
              progress=False)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("train-sft step")]
    assert [line.split(" (")[0] for line in lines] == ["train-sft step 1/3", "train-sft step 3/3"]
    assert all(" loss " in line for line in lines)
