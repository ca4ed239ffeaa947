"""`train-sft`: LoRA SFT of a causal LM on `build-sft` rows with TRL's SFTTrainer and PEFT.

The rows are rendered here (`sft/render.py`) into input ids and a completion mask, so TRL trains exactly
the tokens the deployment model produces and nothing it only reads. Runs under `accelerate launch`
unchanged (FSDP2, DeepSpeed ZeRO-3, several nodes): only the main process writes files other than
the adapter and checkpoints, which the trainer saves collectively.
"""

from __future__ import annotations

import importlib.util
import math
import os
import resource
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from transformers import PrinterCallback, TrainerCallback
from trl import SFTTrainer

from unscaffold.errors import InputError
from unscaffold.iojson import append_jsonl, read_json, write_json_atomic, write_text_atomic
from unscaffold.sft.config import SFT_PEFT, SFT_TRL, TrainConfig, gradient_accumulation
from unscaffold.sft.data import Prepared, prepare, read_rows
from unscaffold.specs import WeightsSpec
from unscaffold.training_record import Clock, TrainingRecord, lora_moved, sft_record

CHECKPOINTS = "checkpoints"
LOG = "train_log.jsonl"
SUMMARY = "summary.json"
CONFIG = "train_config.json"
PLOT = "loss.png"
LOG_KEYS = ("loss", "learning_rate", "grad_norm", "trained_tokens", "num_tokens", "epoch", "mean_token_accuracy")


class TrainSummary(BaseModel):
    """What `summary.json` holds; `tokens_per_s` counts trained (target) tokens, `input_tokens_per_s` all."""

    base_model: str
    steps: int
    epochs: float
    trained_tokens: int
    tokens_per_s: float
    input_tokens: int
    input_tokens_per_s: float
    first_loss: float | None
    final_loss: float | None
    train_seconds: float
    peak_memory_gb: float
    peak_memory_kind: str = Field(description="cuda_allocated (max over local GPUs) or cpu_rss (this process)")
    world_size: int
    gradient_accumulation_steps: int
    resumed_from_step: int | None = None
    rows: int
    rows_used: int
    samples: int
    rows_dropped: dict[str, int]
    rows_split: int = Field(0, description="rows trained turn by turn because the tokenizer merges at a turn boundary")
    data_sources: dict[str, int] = Field(default_factory=dict, description="rows per `source` label of build-sft "
                                         "(the data-source ablation: reviewer_k, empty_k, gold_reviewer, hstar, "
                                         "unreviewed)")
    dropped: list[dict[str, Any]] = Field(description="the first 50 dropped rows or turns, with reasons")
    hardware: dict[str, Any]
    lora_modules: dict[str, int] = Field(default_factory=dict, description="module path within a layer (e.g. "
                                         "`linear_attn.in_proj_qkv`) -> how many layers train a LoRA adapter on it")
    record: TrainingRecord | None = Field(None, description="base model, train tasks, settings and full cost, in "
                                          "the units `rescue train` records too")


def world() -> tuple[int, bool]:
    """(number of processes, whether this is the main one) as `accelerate launch` / torchrun set them."""
    return int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0")) == 0


LINEAR_ATTENTION_KERNELS = {"fla": "flash-linear-attention", "causal_conv1d": "causal-conv1d"}


def is_hybrid(base_path: str) -> bool:
    """Whether the model has linear-attention layers (Qwen3.5 Gated DeltaNet), read from its config alone."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(base_path)
    except (OSError, ValueError):
        return False  # the model load reports the problem itself
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return "linear_attention" in (getattr(text, "layer_types", None) or [])


def missing_packing_kernels() -> list[str]:
    """Packages without which linear-attention layers cannot keep packed sequences apart.

    transformers' reference PyTorch kernels ignore sequence boundaries: the recurrent state and the causal
    convolution would carry one sequence into the next (tests/test_tiny_qwen3_5.py measures it)."""
    return [dist for module, dist in LINEAR_ATTENTION_KERNELS.items() if importlib.util.find_spec(module) is None]


def resolve_hardware(config: TrainConfig, hybrid: bool = False) -> dict[str, Any]:
    """Turn the `auto` settings into what this machine supports; `hybrid`: the model has linear attention."""
    import torch

    cuda = torch.cuda.is_available()
    bf16 = (cuda and torch.cuda.is_bf16_supported()) if config.bf16 == "auto" else bool(config.bf16)
    attn = config.attn_implementation
    if attn == "auto":
        attn = "flash_attention_2" if cuda and importlib.util.find_spec("flash_attn") else "sdpa"
    padding_free = config.padding_free
    if padding_free == "auto":  # never for hybrid models: asked for explicitly, with the kernels, or not at all
        padding_free = not hybrid and attn.startswith("flash") and config.per_device_batch_size > 1
    elif padding_free and hybrid and missing_packing_kernels():
        raise InputError("train-sft", "padding_free", "a hybrid (linear-attention) model mixes packed sequences "
                         f"without {' and '.join(missing_packing_kernels())}; install them or set padding_free "
                         "to false")
    return {"device": "cuda" if cuda else "cpu", "bf16": bf16, "attn_implementation": attn,
            "padding_free": bool(padding_free), "gradient_checkpointing": config.gradient_checkpointing}


def check_out_dir(out: Path, resume: bool) -> str | None:
    """The checkpoint to resume from; refuses to train over a finished or started run without --resume."""
    from transformers.trainer_utils import get_last_checkpoint

    ckpt_dir = out / CHECKPOINTS
    last = get_last_checkpoint(str(ckpt_dir)) if ckpt_dir.is_dir() else None
    if resume:
        if last is None:
            raise InputError(str(out), None, "--resume: no checkpoint to resume from")
        return last
    if last is not None or (out / SUMMARY).exists():
        raise InputError(str(out), None, "holds a training run already; pass --resume or choose another --out")
    return None


RESUMABLE_CHANGES = ("max_steps", "epochs", "logging_steps", "save_steps", "save_total_limit")


def _check_same_run(out: Path, config: TrainConfig) -> None:
    """A resumed run must train what it started with; only how long and how often it saves may change."""
    saved_path = out / CONFIG
    if not saved_path.exists():
        return
    saved = read_json(saved_path)
    for key, value in config.model_dump().items():
        if key not in RESUMABLE_CHANGES and key in saved and saved[key] != value:
            raise InputError(str(saved_path), key, f"--resume with {value!r}, but the run started with {saved[key]!r}")


def load_tokenizer(model: WeightsSpec | str) -> Any:
    from transformers import AutoTokenizer

    from unscaffold.offline.tiny import resolve_model_path

    path = resolve_model_path(model)
    if path.startswith(("/", ".", "~")) and not Path(path).expanduser().is_dir():
        raise InputError("--model", None, f"{str(model)!r} is not a model folder (nor a hub id, nor tiny)")
    try:
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError("--model", None, f"cannot load a tokenizer from {str(model)!r}: {first}") from None


def train_sft(data: Path, out: Path, config: TrainConfig, *, resume: bool = False,
              progress: bool = True) -> TrainSummary:
    """Train, write the run folder (adapter, config, log, summary, plot) and return the summary."""
    import torch
    from transformers import AutoModelForCausalLM

    from unscaffold.offline.tiny import resolve_model_path

    out = Path(out)
    clock = Clock()
    world_size, main = world()
    accumulation = gradient_accumulation(config, world_size)
    checkpoint = check_out_dir(out, resume)
    if checkpoint is not None:
        _check_same_run(out, config)
    base = resolve_model_path(config.model)
    tokenizer = load_tokenizer(config.model)
    prepared = _prepare_with_bar(read_rows(data), tokenizer, config, show=main and progress)
    if not prepared.samples:
        reasons = ", ".join(f"{k}: {v}" for k, v in prepared.dropped_by_reason().items())
        raise InputError(str(data), None, f"no trainable sample left ({reasons})"
                         + ("; try --split-turns" if "prefix_property" in reasons else ""))
    hardware = resolve_hardware(config, hybrid=is_hybrid(base))
    if main:
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out / CONFIG, {**config.model_dump(), "resolved": {
            **hardware, "base_model_path": base, "world_size": world_size,
            "gradient_accumulation_steps": accumulation}})
        resumed_step = _truncate_log(out / LOG, checkpoint)
    else:
        resumed_step = None
    lora = lora_config(config)
    args = sft_config(config, out, hardware, accumulation)
    # the model is loaded after SFTConfig exists: under DeepSpeed ZeRO-3 it is then built already partitioned
    dtype = torch.bfloat16 if hardware["bf16"] else torch.float32
    model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype, attn_implementation=hardware["attn_implementation"])
    from unscaffold.llm.hf_backend import quiet_after_first_load

    quiet_after_first_load()
    trainer = _Trainer(
        model=model, args=args, train_dataset=_dataset(prepared), processing_class=tokenizer, peft_config=lora,
        linear_floor=config.min_lr / config.learning_rate if config.lr_scheduler == "linear_to_min_lr" else None,
    )
    trainer.remove_callback(PrinterCallback)  # the log goes to train_log.jsonl and the bar, not stdout
    callbacks: list[Any] = [_LogFile(out / LOG)] if main else []
    if main:
        callbacks.append(_ProgressBar() if progress else _ProgressLog())
    for cb in callbacks:
        trainer.add_callback(cb)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    started = time.monotonic()
    trainer.train(resume_from_checkpoint=checkpoint)
    seconds = time.monotonic() - started
    trainer.save_model(str(out))
    summary = _summary(trainer, prepared, config, base, hardware, world_size, accumulation, seconds, resumed_step)
    summary.record = sft_record(data, config.model, base, summary.steps, config.seed, clock,
                                lora_moved(trainer.model), passed_through(config))
    if main:
        write_json_atomic(out / SUMMARY, summary)
        plot_loss(out / LOG, out / PLOT)
    return summary


def sft_arguments(config: TrainConfig, out: Path, hardware: dict[str, Any], accumulation: int) -> dict[str, Any]:
    """The recipe's SFTConfig arguments (every key named in SFT_TRL.set_by or its defaults)."""
    cosine = config.lr_scheduler == "cosine_with_min_lr"
    return dict(
        output_dir=str(out / CHECKPOINTS),
        num_train_epochs=config.epochs,
        max_steps=config.max_steps or -1,
        per_device_train_batch_size=config.per_device_batch_size,
        gradient_accumulation_steps=accumulation,
        learning_rate=config.learning_rate,
        lr_scheduler_type="cosine_with_min_lr" if cosine else "constant",
        lr_scheduler_kwargs={"min_lr": config.min_lr} if cosine else {},
        warmup_steps=config.warmup_ratio,
        weight_decay=config.weight_decay,
        max_grad_norm=config.max_grad_norm,
        seed=config.seed,
        data_seed=config.seed,
        bf16=hardware["bf16"],
        activation_checkpointing=config.gradient_checkpointing,
        activation_checkpointing_kwargs={"use_reentrant": False} if config.gradient_checkpointing else None,
        padding_free=hardware["padding_free"],
        completion_only_loss=True,
        max_length=None,  # samples over max_length were dropped and counted above, never truncated here
        logging_steps=config.logging_steps,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=config.save_total_limit,
        report_to=[],
        use_cpu=hardware["device"] == "cpu",  # under accelerate launch on CPUs: gloo processes, not one
        disable_tqdm=True,
        dataset_num_proc=None,
    )


def sft_config(config: TrainConfig, out: Path, hardware: dict[str, Any], accumulation: int) -> Any:
    """TRL's SFTConfig: the recipe's arguments, then the `--trl` fields."""
    from trl import SFTConfig

    return SFTConfig(**SFT_TRL.apply(sft_arguments(config, out, hardware, accumulation), config.trl))


def lora_config(config: TrainConfig) -> Any:
    """PEFT's LoraConfig: the recipe's rank, alpha, dropout and modules, then the `--peft` fields."""
    from peft import LoraConfig

    targets: str | list[str] = config.target_modules
    if config.target_modules != "all-linear":
        targets = [t.strip() for t in config.target_modules.split(",") if t.strip()]
    recipe = dict(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                  target_modules=targets, task_type="CAUSAL_LM")
    return LoraConfig(**SFT_PEFT.apply(recipe, config.peft))


def passed_through(config: TrainConfig) -> dict[str, dict[str, Any]]:
    """The `--trl` and `--peft` fields a run was given, by flag (those given)."""
    return {flag: values for flag, values in (("--trl", config.trl), ("--peft", config.peft)) if values}


def _prepare_with_bar(rows: list[Any], tokenizer: Any, config: TrainConfig, show: bool) -> Prepared:
    if not show:
        return prepare(rows, tokenizer, max_length=config.max_length, split_turns=config.split_turns)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from unscaffold.console import err_console

    with Progress(TextColumn("rendering rows"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=err_console(), transient=True) as bar:
        job = bar.add_task("render", total=len(rows))
        return prepare(rows, tokenizer, max_length=config.max_length, split_turns=config.split_turns,
                       progress=lambda: bar.advance(job))


def _dataset(prepared: Prepared) -> Any:
    from datasets import Dataset, disable_progress_bars

    disable_progress_bars()
    return Dataset.from_dict({"input_ids": [s.input_ids for s in prepared.samples],
                              "completion_mask": [s.completion_mask for s in prepared.samples]})


def _truncate_log(path: Path, checkpoint: str | None) -> int | None:
    """On resume, forget log lines past the checkpoint (they will be logged again); a fresh run starts empty."""
    import json

    if checkpoint is None:
        path.unlink(missing_ok=True)
        return None
    step = int(Path(checkpoint).name.rsplit("-", 1)[1])
    if path.exists():
        kept = [line for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip() and json.loads(line)["step"] <= step]
        write_text_atomic(path, "".join(line + "\n" for line in kept))
    return step


def _summary(trainer: Any, prepared: Prepared, config: TrainConfig, base: str, hardware: dict[str, Any],
             world_size: int, accumulation: int, seconds: float, resumed_step: int | None) -> TrainSummary:
    import torch

    history = [h for h in trainer.state.log_history if "loss" in h]
    if torch.cuda.is_available():
        peak = max(torch.cuda.max_memory_allocated(d) for d in range(torch.cuda.device_count())) / 2**30
        kind = "cuda_allocated"
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
        kind = "cpu_rss"
    trained = trainer.trained_tokens_total()
    run_trained, run_input = trainer.run_trained_tokens, trainer.run_input_tokens
    return TrainSummary(
        base_model=base, steps=trainer.state.global_step, epochs=round(trainer.state.epoch or 0.0, 4),
        trained_tokens=trained, tokens_per_s=run_trained / seconds if seconds else 0.0,
        input_tokens=int(trainer._total_train_tokens), input_tokens_per_s=run_input / seconds if seconds else 0.0,
        first_loss=history[0]["loss"] if history else None, final_loss=history[-1]["loss"] if history else None,
        train_seconds=round(seconds, 3), peak_memory_gb=round(peak, 3), peak_memory_kind=kind,
        world_size=world_size, gradient_accumulation_steps=accumulation, resumed_from_step=resumed_step,
        rows=prepared.rows, rows_used=prepared.rows_used, samples=len(prepared.samples),
        rows_dropped=prepared.dropped_by_reason(), rows_split=len(prepared.rows_split),
        data_sources=prepared.sources, dropped=[d.model_dump() for d in prepared.dropped[:50]],
        hardware=hardware, lora_modules=lora_modules(trainer.model),
    )


def lora_modules(model: Any) -> dict[str, int]:
    """Which modules carry LoRA, by their path inside a decoder layer, with the number of layers each."""
    import re

    counts: dict[str, int] = {}
    for name, module in model.named_modules():
        if hasattr(module, "lora_A") and hasattr(module, "base_layer"):
            key = re.sub(r"^.*?\.layers\.\d+\.", "", name)
            counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def plot_loss(log: Path, png: Path) -> None:
    """loss.png: training loss and learning rate per step, from train_log.jsonl."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines() if x.strip()] if log.exists() else []
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.plot([x["step"] for x in lines], [x["loss"] for x in lines], color="tab:blue", label="loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    lr = ax.twinx()
    lr.plot([x["step"] for x in lines], [x.get("lr", math.nan) for x in lines], color="tab:orange", alpha=0.6)
    lr.set_ylabel("learning rate")
    ax.set_title("train-sft")
    fig.tight_layout()
    tmp = png.with_name(f".{png.name}.{os.getpid()}.tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, png)


class _Trainer(SFTTrainer):
    """SFTTrainer that counts trained tokens (over all processes) and can decay linearly to a floor."""

    def __init__(self, *args: Any, linear_floor: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.linear_floor = linear_floor
        self.run_trained_tokens = 0
        self.run_input_tokens = 0
        self._input_seen = 0

    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        labels = inputs.get("labels")
        if labels is not None and model.training:
            self.run_trained_tokens += int(self.accelerator.gather_for_metrics((labels != -100).sum()).sum().item())
        before = self._total_train_tokens
        result = super().compute_loss(model, inputs, return_outputs=return_outputs,
                                      num_items_in_batch=num_items_in_batch)
        self.run_input_tokens += self._total_train_tokens - before
        return result

    def trained_tokens_total(self) -> int:
        """Trained tokens since the start of the run, including steps done before a resume."""
        return self._before_resume() + self.run_trained_tokens

    def _before_resume(self) -> int:
        if not hasattr(self, "_resumed_base"):
            earlier = [h["trained_tokens"] for h in self.state.log_history if "trained_tokens" in h]
            self._resumed_base = int(earlier[-1]) if earlier else 0
        return self._resumed_base

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:
            logs["trained_tokens"] = self.trained_tokens_total()
        super().log(logs, start_time)

    def create_scheduler(self, num_training_steps: int, optimizer: Any = None) -> Any:
        if self.linear_floor is None or self.lr_scheduler is not None:
            return super().create_scheduler(num_training_steps, optimizer)
        from torch.optim.lr_scheduler import LambdaLR

        warmup = self.args.get_warmup_steps(num_training_steps)
        floor = self.linear_floor

        def factor(step: int) -> float:
            if step < warmup:
                return step / max(1, warmup)
            done = (step - warmup) / max(1, num_training_steps - warmup)
            return floor + (1.0 - floor) * max(0.0, 1.0 - done)

        chosen = optimizer or self.optimizer
        if chosen is None:
            raise RuntimeError("create_scheduler: no optimizer yet (the Trainer creates it first)")
        self.lr_scheduler = LambdaLR(chosen, factor)
        self._created_lr_scheduler = True
        return self.lr_scheduler


class _LogFile(TrainerCallback):
    """One line per logged step in train_log.jsonl: step, loss, lr, trained tokens (and what else TRL logs)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any) -> None:
        if not logs or "loss" not in logs or not state.is_world_process_zero:
            return
        line: dict[str, Any] = {"step": state.global_step}
        for key in LOG_KEYS:
            if key in logs:
                line["lr" if key == "learning_rate" else key] = logs[key]
        append_jsonl(self.path, line)


class _ProgressLog(TrainerCallback):
    """Where stderr is no terminal: a line with the step and the latest loss now and then (progress_lines)."""

    def __init__(self) -> None:
        from unscaffold.progress_lines import ProgressLines

        self.lines = ProgressLines("train-sft step")
        self.loss = "-"

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any) -> None:
        if logs and "loss" in logs:
            self.loss = f"{logs['loss']:.4f}"

    def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        self.lines.update(state.global_step, f"loss {self.loss}", total=state.max_steps)


class _ProgressBar(TrainerCallback):
    """A rich progress bar over optimizer steps with the latest loss."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        from unscaffold.console import err_console

        self.bar = Progress(TextColumn("train-sft"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("loss {task.fields[loss]}"), TimeRemainingColumn(),
                            console=err_console())
        self.task: Any = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        self.task = self.bar.add_task("train", total=state.max_steps, completed=state.global_step, loss="-")
        self.bar.start()

    def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        self.bar.update(self.task, completed=state.global_step)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any) -> None:
        if logs and "loss" in logs and self.task is not None:
            self.bar.update(self.task, loss=f"{logs['loss']:.4f}")

    def on_train_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        self.bar.stop()

