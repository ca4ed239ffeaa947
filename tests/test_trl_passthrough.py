"""`--trl KEY=VALUE` / `--peft KEY=VALUE` (and `[trl]` / `[peft]` tables of `--config`): any field of TRL's
SFTConfig or GRPOConfig and PEFT's LoraConfig reaches the config object the command builds; a field that
is no field, has the wrong type, or is one the recipe sets itself is one line naming the key."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from unscaffold.cli import app
from unscaffold.passthrough import literal
from unscaffold.rescue.settings import RESCUE_PEFT, RESCUE_TRL
from unscaffold.rescue.train import RescueTrainConfig, grpo_arguments, grpo_config
from unscaffold.rescue.train import lora_config as rescue_lora
from unscaffold.sft.config import SFT_PEFT, SFT_TRL, TrainConfig
from unscaffold.sft.train import lora_config, passed_through, sft_arguments, sft_config

CPU = {"device": "cpu", "bf16": False, "padding_free": False, "attn_implementation": "sdpa",
       "gradient_checkpointing": True}


@pytest.mark.parametrize(("text", "value"), [
    ("0.5", 0.5), ("1e-6", 1e-6), ("3", 3), ("true", True), ("null", None), ("[1, 2]", [1, 2]),
    ('{"a": 1}', {"a": 1}), ("{a = 1}", {"a": 1}), ("'quoted'", "quoted"), ('"x y"', "x y"),
    ("adamw_torch", "adamw_torch"), ("", ""),
])
def test_values_are_toml_or_json_literals_else_text(text: str, value: object) -> None:
    assert literal(text) == value


def test_grpo_config_gets_any_field_beside_the_recipe(tmp_path: Path) -> None:
    config = RescueTrainConfig(suite="appworld_lite", model="tiny", out=tmp_path, k=4, tasks_per_step=2,
                               trl=["vllm_gpu_memory_utilization=0.5", "report_to=none", "logging_steps=5"])
    assert config.trl == {"vllm_gpu_memory_utilization": 0.5, "report_to": "none", "logging_steps": 5}
    args = grpo_config(config)
    assert (args.vllm_gpu_memory_utilization, args.report_to, args.logging_steps) == (0.5, [], 5)
    assert (args.num_generations, args.per_device_train_batch_size, args.beta, args.epsilon_high) == (4, 4, 0.0, 0.28)
    assert RescueTrainConfig(suite="appworld_lite", model="tiny", out=tmp_path).trl == {}
    assert grpo_config(RescueTrainConfig(suite="appworld_lite", model="tiny", out=tmp_path)
                       ).vllm_gpu_memory_utilization == 0.3  # TRL's own default where none is given


def test_lora_configs_get_any_peft_field(tmp_path: Path) -> None:
    rescue = RescueTrainConfig(suite="appworld_lite", model="tiny", out=tmp_path, peft=["use_rslora=true",
                                                                                         "lora_dropout=0.1"])
    lora = rescue_lora(rescue)
    assert (lora.use_rslora, lora.lora_dropout, lora.r, lora.target_modules) == (True, 0.1, 32, "all-linear")
    sft = lora_config(TrainConfig(target_modules="q_proj,v_proj", peft={"use-dora": True}))
    assert (sft.use_dora, sft.r, sorted(sft.target_modules)) == (True, 32, ["q_proj", "v_proj"])


def test_sft_config_gets_any_field_beside_the_recipe(tmp_path: Path) -> None:
    config = TrainConfig(trl=["adam_beta2=0.95", "optim=adamw_torch", "run_name=123", "report_to=['tensorboard']"])
    assert config.trl == {"adam_beta2": 0.95, "optim": "adamw_torch", "run_name": "123",
                          "report_to": ["tensorboard"]}
    args = sft_config(config, tmp_path, CPU, 8)
    assert (args.adam_beta2, args.optim, args.run_name, args.report_to) == (0.95, "adamw_torch", "123",
                                                                            ["tensorboard"])
    assert (args.warmup_steps, args.learning_rate, args.completion_only_loss) == (0.05, 2e-4, True)
    assert passed_through(config) == {"--trl": config.trl}
    assert passed_through(TrainConfig()) == {}


def test_the_tables_of_recipe_keys_match_the_recipes_and_the_dataclasses(tmp_path: Path) -> None:
    """Every key a recipe sets is named (refused, or a default `--trl` replaces), and every name is a field."""
    from peft import LoraConfig
    from trl import GRPOConfig, SFTConfig

    sft = sft_arguments(TrainConfig(), tmp_path, CPU, 8)
    grpo = grpo_arguments(RescueTrainConfig(suite="appworld_lite", model="tiny", out=tmp_path))
    for recipe, table, cls in ((sft, SFT_TRL, SFTConfig), (grpo, RESCUE_TRL, GRPOConfig)):
        assert set(recipe) == set(table.set_by) | table.defaults
        assert set(recipe) <= {f.name for f in dataclasses.fields(cls)}
    for table in (SFT_PEFT, RESCUE_PEFT):
        assert set(table.set_by) <= {f.name for f in dataclasses.fields(LoraConfig)}
    with pytest.raises(RuntimeError, match=r"^--trl: the recipe sets \['max_steps'\], which set_by does not name$"):
        dataclasses.replace(SFT_TRL, set_by={}).apply({"max_steps": 1}, {})


def _error(*argv: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(argv))
    return result.exit_code, result.output


def test_bad_train_sft_keys_are_one_line_naming_the_key(tmp_path: Path) -> None:
    def refused(*extra: str) -> tuple[int, str]:
        return _error("train-sft", str(tmp_path / "data.jsonl"), "--out", str(tmp_path / "o"), *extra)

    assert refused("--trl", "warmup_ratio=0.1") == (
        2, "error: --trl: warmup_ratio: not a field of SFTConfig; it is this command's --warmup-ratio\n")
    assert refused("--trl", "warmup_ratoi=0.1") == (
        2, "error: --trl: warmup_ratoi: not a field of SFTConfig; did you mean this command's --warmup-ratio?\n")
    assert refused("--trl", "optimm=adamw_torch") == (
        2, "error: --trl: optimm: not a field of SFTConfig; did you mean optim?\n")
    assert refused("--trl", "learning_rate=1e-4") == (2, "error: --trl: learning_rate: set by --learning-rate, not "
                                                         "--trl\n")
    assert refused("--trl", "completion_only_loss=false") == (
        2, "error: --trl: completion_only_loss: fixed by this command (only the model's own tokens train)\n")
    assert refused("--trl", "adam_beta2=abc") == (
        2, "error: --trl: adam_beta2: Input should be a valid number, unable to parse string as a number (got "
           "'abc')\n")
    assert refused("--trl", "adam_beta2") == (2, "error: --trl: 'adam_beta2' is not KEY=VALUE\n")
    assert refused("--peft", "r=8") == (2, "error: --peft: r: set by --lora-r, not --peft\n")
    assert refused("--peft", "use_rslor=true") == (
        2, "error: --peft: use_rslor: not a field of LoraConfig; did you mean use_rslora?\n")
    config = tmp_path / "c.toml"
    config.write_text("[train_sft.trl]\nadam_beta2 = \"x\"\n")
    assert refused("--config", str(config)) == (
        2, f"error: {config}: trl: adam_beta2: Input should be a valid number, unable to parse string as a number "
           "(got 'x')\n")
    assert not (tmp_path / "o").exists()


def test_bad_rescue_train_keys_are_one_line_naming_the_key(tmp_path: Path) -> None:
    def refused(*extra: str) -> tuple[int, str]:
        return _error("rescue", "train", "appworld_lite", "--model", "tiny", "--no-preflight", "--out",
                      str(tmp_path / "o"), *extra)

    assert refused("--trl", "num_generations=4") == (2, "error: --trl: num_generations: set by --k, not --trl\n")
    assert refused("--trl", "beta=0.04") == (
        2, "error: --trl: beta: fixed by this command (the published objective has no KL term)\n")
    assert refused("--trl", "vllm_gpu_memory_utilisation=0.5") == (
        2, "error: --trl: vllm_gpu_memory_utilisation: not a field of GRPOConfig; did you mean "
           "vllm_gpu_memory_utilization?\n")
    assert refused("--peft", "target_modules=['q_proj']") == (
        2, "error: --peft: target_modules: fixed by this command (every linear layer, as the SFT recipe)\n")
    assert refused("--peft", "use_rslora=true", "--init-adapter", str(tmp_path)) == (
        2, "error: --peft: a warm start (--init-adapter) trains the adapter as it was saved; --peft has nothing to "
           "set\n")
    assert not (tmp_path / "o").exists()


def test_a_config_table_and_flags_add_up_the_flags_winning(tmp_path: Path) -> None:
    from unscaffold.cli_options import build_settings

    config = tmp_path / "c.toml"
    config.write_text("[trl]\nvllm_gpu_memory_utilization = 0.4\nvllm_enable_sleep_mode = true\n")
    command = get_command(app).commands["rescue"].commands["train"]  # type: ignore[attr-defined]
    ctx = command.make_context("train", ["appworld_lite", "--model", "tiny", "--out", str(tmp_path / "o"),
                                         "--config", str(config), "--trl", "vllm_gpu_memory_utilization=0.5"])
    settings = build_settings(RescueTrainConfig, ctx, ctx.params, {"suite": "appworld_lite"}, config,
                              "rescue_train")
    assert isinstance(settings, RescueTrainConfig)
    assert settings.trl == {"vllm_gpu_memory_utilization": 0.5, "vllm_enable_sleep_mode": True}
