"""`merge`: fold a LoRA adapter into its base weights, for servers (vLLM, SGLang) that want one checkpoint."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from unscaffold.errors import InputError
from unscaffold.iojson import read_json
from unscaffold.specs import WeightsSpec


def merge_adapter(adapter: Path, out: Path, base: WeightsSpec | str | None = None) -> Path:
    """Write base + adapter as plain weights (safetensors) with the tokenizer and chat template beside them."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from unscaffold.offline.tiny import resolve_model_path

    adapter, out = Path(adapter), Path(out)
    if out.exists() and any(out.iterdir()):
        raise InputError(str(out), None, "exists and is not empty; choose another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    config_path = adapter / "adapter_config.json"
    if not config_path.is_file():
        raise InputError(str(adapter), None, "not a PEFT adapter folder (no adapter_config.json)")
    recorded = read_json(config_path).get("base_model_name_or_path")
    base = base or recorded
    if not base or not isinstance(base, WeightsSpec | str):
        raise InputError(str(config_path), "base_model_name_or_path", "missing; pass --base")
    base_path = resolve_model_path(base)
    try:
        model = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.bfloat16 if torch.cuda.is_available()
                                                     else torch.float32)
        merged = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
        has_tokenizer = (adapter / "tokenizer_config.json").is_file()
        tokenizer = AutoTokenizer.from_pretrained(str(adapter) if has_tokenizer else base_path)
    except (OSError, ValueError) as e:
        raise InputError(str(adapter), None, f"cannot load {base_path} with this adapter: {e}") from None
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    try:
        merged.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        os.replace(tmp, out)  # a folder appears whole or not at all
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
