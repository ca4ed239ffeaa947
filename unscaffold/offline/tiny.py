"""Tiny random Qwen models with a real Qwen chat template, built offline in a second or two.

Tests (and training commands given the model `tiny` or `tiny-qwen3.5`) need a checkpoint that loads
through the same AutoTokenizer / AutoModelForCausalLM / chat-template path as a real Qwen model, but no
weights can be downloaded. The chat template is TRL's verbatim copy of the real one (so TRL recognises it
and swaps in its training variant).

- `tiny`: a 2-layer Qwen3 (full attention only) with a byte-level BPE trained on a small built-in corpus
  (so any text round-trips).
- `tiny-qwen3.5`: the Qwen3.5 hybrid architecture the recipes deploy (three Gated DeltaNet linear-attention
  layers, then one full-attention layer, hidden 64), with the real Qwen BPE (`qwen_bpe.py`) when its ranks
  are installed, else the trained tokenizer. Only this architecture exercises the linear-attention LoRA
  targets, the recurrent cache and the packing limits of the linear-attention kernels.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from unscaffold.llm.trl_templates import available_templates as available_templates
from unscaffold.llm.trl_templates import read_trl_template
from unscaffold.specs.model import TINY_VARIANTS, WeightsSpec

DEFAULT_TEMPLATE = "qwen3_5_think"
MARKER = "unscaffold_tiny.json"
MAX_POSITIONS = 32768
QWEN3 = "qwen3"
HYBRID = "qwen3_5"  # the Qwen3.5 hybrid (linear + full attention)
ARCHS = (QWEN3, HYBRID)
HYBRID_LAYER_TYPES = ["linear_attention", "linear_attention", "linear_attention", "full_attention"]
# The hybrid's weights are initialised wider than transformers' 0.02: with 0.02 its output is nearly uniform over
# 151k tokens whatever the context, which would hide a recurrent state leaking from one sequence into the next.
HYBRID_INIT_STD = 0.2

# Special tokens: the control tokens are "special" (skip_special_tokens drops them); the tags are plain
# added tokens, as in the real Qwen tokenizers, so decoding keeps them.
CONTROL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TAG_TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]

# Qwen2/Qwen3 pre-tokenizer split (letters, single digits, punctuation runs, newlines, spaces).
_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

_CORPUS = r"""
You are a helpful assistant. Solve the task in the workspace with the execute tool.
Run one bash command in a fresh shell in the workspace root and return its combined stdout and stderr.
<tool_call>
<function=execute>
<parameter=command>
ls -la /workspace && cat README.md | head -n 40
</parameter>
</function>
</tool_call>
<tool_call>
{"name": "execute", "arguments": {"command": "python3 -c 'import sys; print(sys.version)'"}}
</tool_call>
<tool_response>
total 12
drwxr-xr-x 2 root root 4096 Jan  1 00:00 .
-rw-r--r-- 1 root root  512 Jan  1 00:00 data.xlsx
[exit_code=0]
</tool_response>
<think>
The user wants the total of column B. I should open the spreadsheet with openpyxl first.
</think>
grep -rn "def main" src/ | sort | uniq -c | awk '{print $1}' > out.txt
find . -name "*.py" -type f -exec wc -l {} + | tail -n 1
sed -n 1,80p config.yaml; echo $?; export PATH=$HOME/.local/bin:$PATH
pip install openpyxl rdkit pandas numpy; python -m pytest -q tests/
cd /tmp && mkdir -p out && cp -r ../data ./out/ && rm -f *.log
cat <<'EOF' > solve.py
import json
from pathlib import Path
import openpyxl
wb = openpyxl.load_workbook("input.xlsx", data_only=True)
ws = wb.active
for row in ws.iter_rows(min_row=2, values_only=True):
    print(row[0], row[1], sum(x for x in row[2:] if isinstance(x, (int, float))))
wb.save("output.xlsx")
EOF
{"type": "function", "function": {"name": "execute", "description": "Run a command",
 "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
{"id": "call_0", "role": "assistant", "content": null, "tool_calls": [], "reasoning_content": "ok"}
[1, 2, 3, 4.5, -6e3, true, false, null, "a\"b", {"k": [0, 1]}]
Spreadsheet: Sheet1!A1:C10 =SUM(B2:B9) =VLOOKUP(A2, Sheet2!A:B, 2, FALSE) =AVERAGE(C2:C9) pivot table,
cell, row, column, formula, worksheet, workbook, header, merged cells, number format 0.00%, chart.
Chemistry: molecule, SMILES CC(=O)Oc1ccccc1C(=O)O aspirin, c1ccccc1 benzene, CCO ethanol, [Na+].[Cl-],
molecular weight 180.16 g/mol, logP, TPSA, hydrogen bond donors, Lipinski rule of five, InChI, atom, bond,
ring, aromatic, stereo, Chem.MolFromSmiles(smi), Descriptors.MolWt(mol), rdkit.Chem.AllChem, reaction.
<|im_start|>system
# Tools
You have access to the following functions:
<tools>
</tools>
If you choose to call a function ONLY reply in the following format with NO suffix:
<IMPORTANT>
Reminder:
- Function calls MUST follow the specified format
- Required parameters MUST be specified
</IMPORTANT><|im_end|>
<|im_start|>user
Compute the answer and write it to answer.txt, then say done.<|im_end|>
<|im_start|>assistant
Done. The answer is 42, written to answer.txt.<|im_end|>
The quick brown fox jumps over the lazy dog. 0123456789 !@#$%^&*()_+-=[]{};:'",.<>/?\|`~
Error: No such file or directory. Traceback (most recent call last): File "x.py", line 3, in <module>
KeyError: 'name' ValueError: invalid literal for int() with base 10 Permission denied command not found
"""


def tiny_model_dir(template: str = DEFAULT_TEMPLATE, seed: int = 0, arch: str = QWEN3,
                   cache: Path | None = None) -> Path:
    """Default cache location, shared by runs: `cache`, else $UNSCAFFOLD_CACHE or ~/.cache/unscaffold."""
    root = cache or Path(os.environ.get("UNSCAFFOLD_CACHE") or Path.home() / ".cache" / "unscaffold")
    return root / ("tiny" if arch == QWEN3 else HYBRID_NAME) / f"{template}-seed{seed}"


def build_tiny_model(out_dir: Path, template: str = DEFAULT_TEMPLATE, seed: int = 0,
                     init_std: float | None = None, arch: str = QWEN3) -> Path:
    """Write (once) a loadable tiny Qwen3 (`arch="qwen3"`) or Qwen3.5 hybrid model + tokenizer; return `out_dir`.

    `init_std` widens the random initialisation (default 0.02): with 0.02 the tied output head is too
    small for a LoRA adapter to move the loss far, so training tests that must see a model learn use ~0.2.

    Idempotent: a directory already holding a complete build with the same template and seed is
    returned untouched. The build happens in a sibling temporary directory and is moved in, with
    the marker file written last, so concurrent builders never see a half-written model.
    """
    if arch not in ARCHS:
        raise ValueError(f"unknown tiny architecture {arch!r}; expected one of {', '.join(ARCHS)}")
    if arch == HYBRID and init_std is None:
        init_std = HYBRID_INIT_STD
    out_dir = Path(out_dir)
    wanted: dict[str, object] = {"template": template, "seed": seed, "version": 1}
    if init_std is not None:
        wanted["init_std"] = init_std
    if arch == HYBRID:
        from unscaffold.offline.qwen_bpe import tiktoken_file

        wanted.update(arch=arch, tokenizer="qwen-bpe" if tiktoken_file() is not None else "trained")
    if _complete(out_dir, wanted):
        return out_dir
    chat_template = read_trl_template(template)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        _build(tmp, chat_template, seed, init_std, arch, real_bpe=wanted.get("tokenizer") == "qwen-bpe")
        (tmp / MARKER).write_text(json.dumps(wanted), encoding="utf-8")
        if not out_dir.exists():
            try:
                tmp.rename(out_dir)
                return out_dir
            except OSError:
                if _complete(out_dir, wanted):  # another process won the race
                    return out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        stale = out_dir / MARKER
        if stale.exists():
            stale.unlink()
        for item in sorted(tmp.iterdir(), key=lambda p: p.name == MARKER):
            os.replace(item, out_dir / item.name)
        return out_dir
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _complete(out_dir: Path, wanted: dict[str, object]) -> bool:
    marker = out_dir / MARKER
    if not marker.is_file():
        return False
    try:
        if json.loads(marker.read_text(encoding="utf-8")) != wanted:
            return False
    except (OSError, ValueError):
        return False
    needed = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
    return all((out_dir / name).is_file() for name in needed)


def _train_tokenizer() -> object:
    """Byte-level BPE with the Qwen pre-tokenizer, trained on the built-in corpus (deterministic)."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()  # it takes no settings (keyword arguments were ignored)
    trainer = trainers.BpeTrainer(
        vocab_size=2000,
        min_frequency=1,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator([line for line in _CORPUS.splitlines() if line], trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in CONTROL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAG_TOKENS])
    return tok


def _tokenizer(chat_template: str, real_bpe: bool) -> Any:
    from transformers import PreTrainedTokenizerFast

    if real_bpe:
        from unscaffold.offline.qwen_bpe import load_qwen_tokenizer

        tokenizer: Any = load_qwen_tokenizer(chat_template)
        if tokenizer is None:
            raise FileNotFoundError("the Qwen BPE ranks (qwen.tiktoken) went missing during the build")
        tokenizer.model_max_length = MAX_POSITIONS
        return tokenizer
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=_train_tokenizer(),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        model_max_length=MAX_POSITIONS,
        padding_side="right",
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = chat_template
    return tokenizer


def _model(arch: str, vocab_size: int, eos_id: int, pad_id: int, init_std: float | None) -> Any:
    """Random weights (under the caller's seed); the hybrid keeps Qwen3.5's head shapes at test size."""
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig, Qwen3Config, Qwen3ForCausalLM

    common: dict[str, Any] = dict(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=MAX_POSITIONS, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=eos_id, pad_token_id=pad_id,
        **({"initializer_range": init_std} if init_std is not None else {}),
    )
    if arch == QWEN3:
        return Qwen3ForCausalLM(Qwen3Config(num_hidden_layers=2, **common))
    config = Qwen3_5TextConfig(num_hidden_layers=len(HYBRID_LAYER_TYPES), layer_types=list(HYBRID_LAYER_TYPES),
                               linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                               linear_value_head_dim=16, **common)
    return Qwen3_5ForCausalLM(config)


def _build(path: Path, chat_template: str, seed: int, init_std: float | None = None, arch: str = QWEN3,
           real_bpe: bool = False) -> None:
    import torch
    from transformers import GenerationConfig

    tokenizer = _tokenizer(chat_template, real_bpe)
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = _model(arch, len(tokenizer), eos_id, pad_id, init_std)
    model.generation_config = GenerationConfig(eos_token_id=[eos_id, pad_id], pad_token_id=pad_id)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)


# `tiny`, `tiny-qwen3.5` (the hybrid) and `tiny-wide`, which is `tiny` initialised with std 0.2: the demo's model,
# which must learn its training rows in minutes. With 0.02 the tied output head caps a token's logit near 1, so no
# adapter can make the next token likely. Their names are `--model` spellings (unscaffold/specs/model.py).
TINY_PREFIX, HYBRID_NAME, WIDE_NAME = TINY_VARIANTS
WIDE_INIT_STD = 0.2
BUILT_IN = {TINY_PREFIX: QWEN3, HYBRID_NAME: HYBRID, WIDE_NAME: QWEN3}


def is_built_in(name: WeightsSpec | str) -> bool:
    """`tiny`, `tiny-qwen3.5`, `tiny-wide`, or any with `:TEMPLATE`; or the real `smollm2-135m`."""
    return _weights(name).built_in


def _weights(name: WeightsSpec | str) -> WeightsSpec:
    return name if isinstance(name, WeightsSpec) else WeightsSpec.parse(name)


def resolve_model_path(name: WeightsSpec | str) -> str:
    """`tiny` / `tiny-qwen3.5` (or `NAME:TEMPLATE`, e.g. `tiny:qwen3`) -> the cached checkpoint; else unchanged.

    Lets `--model tiny-qwen3.5`, `hf:tiny-qwen3.5+ADAPTER` and the adapter's recorded base all name the
    same model."""
    from unscaffold.llm import smollm

    spec = _weights(name)
    if spec.kind == "smollm":
        return str(smollm.build())
    if spec.kind == "path":
        return spec.name
    template = spec.template or DEFAULT_TEMPLATE
    arch = BUILT_IN[spec.name]
    if spec.name == WIDE_NAME:
        folder = tiny_model_dir(template, arch=arch).parent.parent / WIDE_NAME / f"{template}-seed0"
        return str(build_tiny_model(folder, template=template, arch=arch, init_std=WIDE_INIT_STD))
    return str(build_tiny_model(tiny_model_dir(template, arch=arch), template=template, arch=arch))
