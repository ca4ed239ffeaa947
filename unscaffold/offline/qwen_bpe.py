"""The real Qwen byte-level BPE (Qwen2/Qwen3/Qwen3.5 vocabulary), built offline from a registry package.

No tokenizer can be downloaded from a hub here, yet rendering, masks and prefix checks must be tested
on the merges real Qwen models have (one token for `\\n\\n`, rank 271), which the tiny trained tokenizer
lacks. The ranks ship as `dashscope/resources/qwen.tiktoken` in the `dashscope` wheel (installed without
its dependencies by the Makefile); `UNSCAFFOLD_QWEN_TIKTOKEN` may name the file instead. The converted
tokenizer is cached as `tokenizer.json` next to the other built-in test models.
"""

from __future__ import annotations

import base64
import importlib.util
import os
import uuid
from pathlib import Path

ENV_VAR = "UNSCAFFOLD_QWEN_TIKTOKEN"
N_RANKS = 151_643

# Qwen2/Qwen3 pre-tokenizer split: single digits, unlike tiktoken's cl100k pattern.
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Added tokens with the ids Qwen3 publishes (after the 151,643 BPE ranks). `special` decides whether
# `skip_special_tokens` drops them; the tags stay plain added tokens, as in the published tokenizer.
ADDED_TOKENS: list[tuple[int, str, bool]] = [
    (151643, "<|endoftext|>", True),
    (151644, "<|im_start|>", True),
    (151645, "<|im_end|>", True),
    (151646, "<|object_ref_start|>", True),
    (151647, "<|object_ref_end|>", True),
    (151648, "<|box_start|>", True),
    (151649, "<|box_end|>", True),
    (151650, "<|quad_start|>", True),
    (151651, "<|quad_end|>", True),
    (151652, "<|vision_start|>", True),
    (151653, "<|vision_end|>", True),
    (151654, "<|vision_pad|>", True),
    (151655, "<|image_pad|>", True),
    (151656, "<|video_pad|>", True),
    (151657, "<tool_call>", False),
    (151658, "</tool_call>", False),
    (151659, "<|fim_prefix|>", False),
    (151660, "<|fim_middle|>", False),
    (151661, "<|fim_suffix|>", False),
    (151662, "<|fim_pad|>", False),
    (151663, "<|repo_name|>", False),
    (151664, "<|file_sep|>", False),
    (151665, "<tool_response>", False),
    (151666, "</tool_response>", False),
    (151667, "<think>", False),
    (151668, "</think>", False),
]


def tiktoken_file() -> Path | None:
    """Where the Qwen ranks are on this machine, or None (tests needing them then skip)."""
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override) if Path(override).is_file() else None
    spec = importlib.util.find_spec("dashscope")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        candidate = Path(root) / "resources" / "qwen.tiktoken"
        if candidate.is_file():
            return candidate
    return None


def read_ranks(path: Path) -> dict[bytes, int]:
    """`base64(token) rank` per line, as tiktoken stores BPE ranks."""
    ranks: dict[bytes, int] = {}
    for lineno, line in enumerate(path.read_text(encoding="ascii").splitlines(), start=1):
        if not line:
            continue
        token, _, rank = line.partition(" ")
        try:
            ranks[base64.b64decode(token)] = int(rank)
        except ValueError as exc:
            raise ValueError(f"{path}: line {lineno}: not `base64 rank`: {line[:40]!r}") from exc
    return ranks


def build_qwen_tokenizer_json(out_file: Path, ranks_file: Path) -> Path:
    """Convert the ranks to a `tokenizers` BPE (merges derived by transformers' tiktoken converter)."""
    from tokenizers import AddedToken, normalizers
    from transformers.convert_slow_tokenizer import TikTokenConverter

    class _Converter(TikTokenConverter):
        @staticmethod
        def load_tiktoken_bpe(tiktoken_url: str) -> dict[bytes, int]:
            return read_ranks(Path(tiktoken_url))

    tok = _Converter(vocab_file=str(ranks_file), pattern=QWEN_PATTERN).converted()
    tok.normalizer = normalizers.NFC()
    for token_id, text, special in ADDED_TOKENS:
        if tok.get_vocab_size(with_added_tokens=True) != token_id:
            raise ValueError(f"{ranks_file}: expected {N_RANKS} ranks before the added tokens")
        if special:
            tok.add_special_tokens([AddedToken(text, special=True, normalized=False)])
        else:
            tok.add_tokens([AddedToken(text, special=False, normalized=False)])
    out_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_file.with_name(f".{out_file.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}")
    tok.save(str(tmp))
    os.replace(tmp, out_file)
    return out_file


def qwen_tokenizer_json(cache_root: Path | None = None) -> Path | None:
    """The cached converted tokenizer, building it once (about 10 s); None without the ranks file."""
    ranks = tiktoken_file()
    if ranks is None:
        return None
    root = cache_root or Path(os.environ.get("UNSCAFFOLD_CACHE") or Path.home() / ".cache" / "unscaffold")
    out = root / "qwen-bpe" / f"tokenizer-{ranks.stat().st_size}.json"
    if out.is_file():
        return out
    return build_qwen_tokenizer_json(out, ranks)


def load_qwen_tokenizer(chat_template: str | None = None) -> object | None:
    """A `PreTrainedTokenizerFast` that tokenizes exactly as Qwen3 does, or None without the ranks."""
    from transformers import PreTrainedTokenizerFast

    path = qwen_tokenizer_json()
    if path is None:
        return None
    tok = PreTrainedTokenizerFast(
        tokenizer_file=str(path),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        model_max_length=262_144,
        padding_side="right",
        clean_up_tokenization_spaces=False,
    )
    if chat_template is not None:
        tok.chat_template = chat_template
    return tok
