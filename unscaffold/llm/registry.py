"""Model specs: `openai:MODEL[@BASE_URL]`, `anthropic:MODEL`, `hf:PATH[+ADAPTER][?max_new_tokens=N][&temperature=T]`,
`replay:FILE[?latency=S]`."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from unscaffold.errors import InputError
from unscaffold.llm.base import Model, ModelProvider

SCHEMES = ("openai", "anthropic", "hf", "replay")


class ModelSpec(BaseModel):
    scheme: str
    target: str
    base_url: str | None = None
    adapter: str | None = None
    latency_s: float = 0.0
    max_new_tokens: int | None = None
    temperature: float | None = None
    raw: str


def parse_spec(spec: str, *, flag: str = "--student") -> ModelSpec:
    scheme, sep, rest = spec.partition(":")
    if not sep or scheme not in SCHEMES or not rest:
        raise InputError(flag, None, f"unknown model spec {spec!r}; expected one of "
                         "openai:MODEL[@BASE_URL], anthropic:MODEL, hf:PATH[+ADAPTER], replay:FILE")
    if scheme == "openai":
        model, _, url = rest.partition("@")
        return ModelSpec(scheme=scheme, target=model, base_url=url or None, raw=spec)
    if scheme == "hf":
        rest, _, query = rest.partition("?")
        path, _, adapter = rest.partition("+")
        options = _hf_options(query, flag) if query else {}
        return ModelSpec(scheme=scheme, target=path, adapter=adapter or None, raw=spec,
                         max_new_tokens=options.get("max_new_tokens"), temperature=options.get("temperature"))
    if scheme == "replay":
        path, _, query = rest.partition("?")
        latency = 0.0
        if query:
            key, _, value = query.partition("=")
            if key != "latency":
                raise InputError(flag, None, f"unknown replay option {key!r}; only latency=SECONDS")
            try:
                latency = float(value)
            except ValueError:
                raise InputError(flag, None, f"replay latency {value!r} is not a number") from None
        return ModelSpec(scheme=scheme, target=path, latency_s=latency, raw=spec)
    return ModelSpec(scheme=scheme, target=rest, raw=spec)


def _hf_options(query: str, flag: str) -> dict[str, int | float]:
    """`max_new_tokens=N` (a small model that never learnt to stop would otherwise generate the default 2,048
    tokens a turn) and `temperature=T` (sampled trials, for Pass@k; default greedy), joined by `&`."""
    out: dict[str, int | float] = {}
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if key == "max_new_tokens":
            if not value.isdigit() or int(value) < 1:
                raise InputError(flag, None, f"hf max_new_tokens {value!r} is not a positive integer")
            out[key] = int(value)
        elif key == "temperature":
            try:
                out[key] = float(value)
            except ValueError:
                raise InputError(flag, None, f"hf temperature {value!r} is not a number") from None
            if not 0 <= out[key] < float("inf"):
                raise InputError(flag, None, f"hf temperature {value!r} is not a number >= 0")
        else:
            raise InputError(flag, None, f"unknown hf option {key!r}; only max_new_tokens=N and temperature=T")
    return out


class _Shared:
    """A stateless backend serves every trial itself."""

    def __init__(self, model: Model) -> None:
        self.model, self.spec = model, model.spec

    def for_trial(self, task_id: str) -> Model:
        return self.model


def load_provider(spec: str, *, flag: str = "--student") -> ModelProvider:
    s = parse_spec(spec, flag=flag)
    if s.scheme == "replay":
        from unscaffold.llm.replay import ReplayProvider

        return ReplayProvider(spec, Path(s.target), s.latency_s)
    if s.scheme == "openai":
        from unscaffold.llm.openai_backend import OpenAIModel

        return _Shared(OpenAIModel(spec, s.target, base_url=s.base_url))
    if s.scheme == "anthropic":
        from unscaffold.llm.anthropic_backend import AnthropicModel

        return _Shared(AnthropicModel(spec, s.target))
    from unscaffold.llm.hf_backend import HFModel

    limit = {"max_new_tokens": s.max_new_tokens} if s.max_new_tokens else {}
    sampling = {"temperature": s.temperature} if s.temperature is not None else {}
    return _Shared(HFModel(spec, s.target, adapter=s.adapter, **limit, **sampling))
