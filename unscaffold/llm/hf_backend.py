"""`hf:PATH[+ADAPTER]`: a local transformers causal LM (optionally with a PEFT adapter) as a Model.

Used to evaluate a fine-tuned student on the same harness as API models: the transcript is
rendered with the checkpoint's own chat template, generated greedily by default (sampled with a temperature
above 0, seeded when a seed is given), decoded with
special tokens kept (so the `<think>` / `<tool_call>` tags survive) and parsed back into a
structured response by `qwen_parse`.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from typing import Any

from unscaffold.errors import ContextLengthError, ModelError
from unscaffold.llm.chat_render import END_OF_TURN, encode, render_chat
from unscaffold.llm.qwen_parse import THINK_OPEN, parse_completion
from unscaffold.llm.sampling import Sampling
from unscaffold.llm.types import AssistantResponse, Message, Usage
from unscaffold.offline.tiny import resolve_model_path


class HFModel:
    """A local model; loads lazily on first use, then serialises generation (one model, one device)."""

    def __init__(
        self,
        spec: str,
        path: str,
        adapter: str | None = None,
        max_new_tokens: int = 2048,
        temperature: float = 0.0,
        device: str | None = None,
        sampling: Sampling | None = None,
    ) -> None:
        """`sampling` (a spec's or a command's settings) overrides `max_new_tokens` and `temperature`."""
        self.spec, self.path, self.adapter = spec, str(path), adapter
        sampling = sampling or Sampling()
        self.max_new_tokens = sampling.max_tokens or max_new_tokens
        self.temperature = sampling.temperature if sampling.temperature is not None else temperature
        self.top_p, self.seed, self.device = sampling.top_p, sampling.seed, device
        self._seen: Counter[str] = Counter()  # prompts generated from so far: the n-th draw of one gets its own seed
        self._tokenizer: Any = None
        self._model: Any = None
        self._context: int | None = None
        self._eos_ids: list[int] = []
        self._load_lock = threading.Lock()
        self._generate_lock = threading.Lock()

    @property
    def tokenizer(self) -> Any:
        """The loaded tokenizer (loads the model on first access), for callers that count tokens."""
        self._ensure_loaded()
        return self._tokenizer

    @property
    def context_length(self) -> int | None:
        """Maximum positions the model accepts (prompt + new tokens), None when the config says nothing."""
        self._ensure_loaded()
        return self._context

    def render_prompt(self, messages: list[Message], tools: list[dict[str, Any]]) -> str:
        """The exact prompt text `complete` generates from: the chat template plus generation prompt."""
        self._ensure_loaded()
        return render_chat(self._tokenizer, messages, tools, add_generation_prompt=True)

    def prompt_ids(self, messages: list[Message], tools: list[dict[str, Any]]) -> list[int]:
        """The token ids `complete` feeds the model: SFT trains each turn on exactly this prefix."""
        return encode(self.tokenizer, self.render_prompt(messages, tools))

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> AssistantResponse:
        """Generate one assistant turn; raises ContextLengthError when the prompt leaves no room."""
        prompt = self.render_prompt(messages, tools)
        import torch

        with self._generate_lock:
            input_ids = torch.tensor([encode(self._tokenizer, prompt)], dtype=torch.long)
            n_input = int(input_ids.shape[1])
            if self._context is not None and n_input > self._context - self.max_new_tokens:
                raise ContextLengthError(
                    f"{self.spec}: prompt of {n_input} tokens + {self.max_new_tokens} new tokens exceeds "
                    f"the context of {self._context} tokens"
                )
            device = self._model.device
            kwargs: dict[str, Any] = {
                "max_new_tokens": self.max_new_tokens,
                "eos_token_id": self._eos_ids or None,
                "pad_token_id": self._tokenizer.pad_token_id,
            }
            if self.temperature > 0:
                kwargs.update(do_sample=True, temperature=self.temperature, top_p=self.top_p)
                if self.seed is not None:
                    torch.manual_seed(self._draw_seed(prompt))
            else:
                kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
            try:
                with torch.inference_mode():
                    output = self._model.generate(
                        input_ids=input_ids.to(device),
                        attention_mask=torch.ones_like(input_ids).to(device),
                        **kwargs,
                    )
            except (RuntimeError, ValueError) as exc:
                raise ModelError(f"{self.spec}: generation failed: {exc}") from exc
            new_ids = output[0, n_input:].tolist()
            text = self._tokenizer.decode(new_ids, skip_special_tokens=False)
        response = parse_completion(text, in_think=prompt.rstrip().endswith(THINK_OPEN), tools=tools)
        response.usage = Usage(input_tokens=n_input, output_tokens=len(new_ids))
        return response

    def _draw_seed(self, prompt: str) -> int:
        """The seed of one sampled turn: from the run's seed, the prompt and how often it was drawn from before,
        so a run repeats its draws (one trial at a time: exactly) and two trials of one task still differ."""
        digest = hashlib.sha256(prompt.encode()).hexdigest()
        n = self._seen[digest]
        self._seen[digest] += 1
        return int(hashlib.sha256(f"{self.seed}:{digest}:{n}".encode()).hexdigest()[:15], 16)

    def _ensure_loaded(self) -> None:
        if self._model is not None:
            return
        with self._load_lock:
            if self._model is None:
                self._load()

    def _load(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        try:
            path = resolve_model_path(self.path)
            tokenizer = AutoTokenizer.from_pretrained(path)
            model: torch.nn.Module = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
            if self.adapter:
                from peft import PeftModel

                model = PeftModel.from_pretrained(model, self.adapter)
        except (OSError, ValueError) as exc:
            what = f"{self.path}+{self.adapter}" if self.adapter else self.path
            raise ModelError(f"{self.spec}: cannot load {what}: {exc}") from exc
        model.to(device)
        model.eval()
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self._context = _context_length(model.config)
        self._eos_ids = _eos_ids(model, tokenizer)
        self._tokenizer = tokenizer
        self._model = model  # set last: it is the "loaded" flag read without the lock
        quiet_after_first_load()


def quiet_after_first_load() -> None:
    """transformers' warnings and weight-loading bars once per process: the first load shows them, later
    loads (a checkpoint per re-anchoring step, a model per trial worker) do not repeat them."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def _context_length(config: Any) -> int | None:
    for cfg in (config.get_text_config() if hasattr(config, "get_text_config") else config, config):
        value = getattr(cfg, "max_position_embeddings", None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    """Stop at any end token the generation config, the tokenizer or the Qwen template uses."""
    ids: list[object] = []  # ints kept below
    configured = getattr(model.generation_config, "eos_token_id", None)
    ids.extend(configured if isinstance(configured, list) else [configured])
    ids.append(tokenizer.eos_token_id)
    end = tokenizer.convert_tokens_to_ids(END_OF_TURN)
    if end != tokenizer.unk_token_id:
        ids.append(end)
    return list(dict.fromkeys(i for i in ids if isinstance(i, int)))
