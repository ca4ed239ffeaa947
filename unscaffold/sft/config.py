"""The one configuration of `train-sft`: every field a CLI flag and a key of `--config FILE` (TOML or YAML).

Defaults are the published Harness-Zero SFT recipe (Qwen3.5-9B, LoRA r32/alpha32 on all linear layers,
peak lr 2e-4, 5% warm-up then decay to 1e-6, 2 epochs, batch 8, max length 65,536, seed 42)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unscaffold.config_file import read_config_file
from unscaffold.errors import InputError
from unscaffold.flags import flag
from unscaffold.iojson import validation_error
from unscaffold.passthrough import PassedThrough, PassThrough, checked

Auto = Literal["auto"]
# The published recipe's LoRA and seed, which rescue training shares.
LORA_RANK = 32
LORA_ALPHA = 32
RECIPE_SEED = 42


# What train-sft builds TRL's SFTConfig and PEFT's LoraConfig from itself; `--trl` / `--peft` give any other field.
SFT_TRL = PassThrough("--trl", "trl.SFTConfig", set_by={
    "output_dir": "--out", "num_train_epochs": "--epochs", "max_steps": "--max-steps",
    "per_device_train_batch_size": "--per-device-batch-size",
    "gradient_accumulation_steps": "--batch-size (over --per-device-batch-size and the devices)",
    "learning_rate": "--learning-rate", "lr_scheduler_type": "--lr-scheduler",
    "lr_scheduler_kwargs": "--lr-scheduler and --min-lr", "warmup_steps": "--warmup-ratio",
    "weight_decay": "--weight-decay", "max_grad_norm": "--max-grad-norm", "seed": "--seed", "data_seed": "--seed",
    "bf16": "--bf16", "activation_checkpointing": "--gradient-checkpointing",
    "activation_checkpointing_kwargs": "--gradient-checkpointing", "padding_free": "--padding-free",
    "completion_only_loss": "only the model's own tokens train",
    "max_length": "--max-length (longer samples are dropped or split before TRL, never cut)",
    "logging_steps": "--logging-steps", "save_strategy": "--save-steps", "save_steps": "--save-steps",
    "save_total_limit": "--save-total-limit",
    "use_cpu": "the CPU exactly when no GPU is visible", "disable_tqdm": "train-sft draws its own progress bar",
}, defaults=frozenset({"report_to", "dataset_num_proc"}))
SFT_PEFT = PassThrough("--peft", "peft.LoraConfig", set_by={
    "r": "--lora-r", "lora_alpha": "--lora-alpha", "lora_dropout": "--lora-dropout",
    "target_modules": "--target-modules", "task_type": "a causal language model"})


class TrainConfig(BaseModel):
    """LoRA SFT settings; `auto` fields resolve to what the hardware supports (see `resolve_hardware`)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field("tiny", json_schema_extra=flag("--model"), description="Base model: a path or hub id, or "
                       "`tiny` / `tiny:TEMPLATE` (the built-in tiny Qwen3) or `tiny-qwen3.5` (the tiny Qwen3.5 "
                       "hybrid).")
    lora_r: int = Field(LORA_RANK, ge=1, json_schema_extra=flag("--lora-r"), description="LoRA rank.")
    lora_alpha: int = Field(LORA_ALPHA, ge=1, json_schema_extra=flag("--lora-alpha"),
                            description="LoRA alpha (scale alpha/r).")
    lora_dropout: float = Field(0.0, ge=0.0, lt=1.0, json_schema_extra=flag("--lora-dropout"),
                                description="Dropout on the LoRA branch.")
    target_modules: str = Field("all-linear", json_schema_extra=flag("--target-modules"),
                                description="Modules that get adapters; `all-linear` is every linear layer but the "
                                "output head; else a comma-separated list of names.")
    learning_rate: float = Field(2e-4, gt=0, json_schema_extra=flag("--learning-rate"),
                                 description="Peak learning rate.")
    warmup_ratio: float = Field(0.05, ge=0.0, lt=1.0, json_schema_extra=flag("--warmup-ratio"),
                                description="Share of steps warming up linearly from 0.")
    min_lr: float = Field(1e-6, ge=0.0, json_schema_extra=flag("--min-lr"),
                          description="Learning rate the decay ends at.")
    lr_scheduler: Literal["cosine_with_min_lr", "linear_to_min_lr"] = Field(
        "cosine_with_min_lr", json_schema_extra=flag("--lr-scheduler"),
        description="Shape of the decay after warm-up: cosine_with_min_lr or linear_to_min_lr (the recipe fixes "
        "only its ends).")
    epochs: float = Field(2.0, gt=0, json_schema_extra=flag("--epochs"), description="Passes over the samples.")
    max_steps: int | None = Field(None, ge=1, json_schema_extra=flag("--max-steps"),
                                  description="Stop after this many optimizer steps (overrides epochs).")
    batch_size: int = Field(8, ge=1, json_schema_extra=flag("--batch-size"),
                            description="Effective batch in samples per optimizer step, over all devices.")
    per_device_batch_size: int = Field(1, ge=1, json_schema_extra=flag("--per-device-batch-size"),
                                       description="Samples per device per forward pass; gradient accumulation = "
                                       "batch_size / (per_device_batch_size x devices).")
    max_length: int = Field(65536, ge=16, json_schema_extra=flag("--max-length"),
                            description="Longest sample in tokens; longer rows are dropped and counted (or split at "
                            "turn boundaries with split_turns), never cut.")
    split_turns: bool = Field(False, json_schema_extra=flag("--split-turns/--no-split-turns"),
                              description="One sample per assistant turn with its own context, for every row; for "
                              "templates that break the prefix property, and rows over max_length (a row only a "
                              "tokenizer merge breaks is split on its own anyway).")
    seed: int = Field(RECIPE_SEED, json_schema_extra=flag("--seed"),
                      description="Seed for LoRA initialisation and data order.")
    bf16: bool | Auto = Field("auto", json_schema_extra=flag("--bf16", text=True),
                              description="bfloat16 weights and autocast: auto, true or false; auto = where the "
                              "device supports it.")
    gradient_checkpointing: bool = Field(True, json_schema_extra=flag(
        "--gradient-checkpointing/--no-gradient-checkpointing"),
        description="Recompute activations in backward (memory for time).")
    padding_free: bool | Auto = Field("auto", json_schema_extra=flag("--padding-free", text=True),
                                      description="Concatenate a batch without padding: auto, true or false; auto = "
                                      "when flash attention is installed and per_device_batch_size > 1, never for "
                                      "hybrid (linear-attention) models, which need flash-linear-attention and "
                                      "causal-conv1d to pack.")
    attn_implementation: str = Field("auto", json_schema_extra=flag("--attn-implementation"),
                                     description="Attention kernel (auto, sdpa, eager, flash_attention_2); auto = "
                                     "flash_attention_2 where installed on CUDA, else sdpa.")
    weight_decay: float = Field(0.0, ge=0.0, json_schema_extra=flag("--weight-decay"),
                                description="AdamW weight decay.")
    max_grad_norm: float = Field(1.0, gt=0.0, json_schema_extra=flag("--max-grad-norm"),
                                 description="Gradient clipping norm.")
    logging_steps: int = Field(1, ge=1, json_schema_extra=flag("--logging-steps"),
                               description="Steps between lines of train_log.jsonl.")
    save_steps: int = Field(50, ge=1, json_schema_extra=flag("--save-steps"),
                            description="Steps between checkpoints (for --resume).")
    save_total_limit: int = Field(2, ge=1, json_schema_extra=flag("--save-total-limit"),
                                  description="Checkpoints kept.")
    trl: PassedThrough = SFT_TRL.setting()
    peft: PassedThrough = SFT_PEFT.setting()
    _passed_through = checked(SFT_TRL, SFT_PEFT)

FIELDS = tuple(TrainConfig.model_fields)


SECTION = "train_sft"  # the table of a config file holding these settings, where the file has one (config_table)


def resolve_config(file: Path | None, overrides: dict[str, Any]) -> TrainConfig:
    """File values, then the settings given (those not None) on top; unknown keys are an error."""
    values = read_config_file(file, SECTION) if file else {}
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return TrainConfig.model_validate(values)
    except ValidationError as e:
        raise validation_error(str(file) if file else "train-sft", e) from None


def gradient_accumulation(config: TrainConfig, world_size: int) -> int:
    """Steps accumulated so that one optimizer step sees `batch_size` samples over all devices."""
    per_step = config.per_device_batch_size * world_size
    if config.batch_size % per_step:
        raise InputError("train-sft", "batch_size", f"{config.batch_size} is not a multiple of per_device_batch_size "
                         f"{config.per_device_batch_size} x {world_size} devices")
    return config.batch_size // per_step
