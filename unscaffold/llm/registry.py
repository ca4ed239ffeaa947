"""Model specs: `openai:MODEL[@BASE_URL]`, `anthropic:MODEL`, `hf:PATH[+ADAPTER]`, `replay:FILE[?latency=S]`."""

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
        path, _, adapter = rest.partition("+")
        return ModelSpec(scheme=scheme, target=path, adapter=adapter or None, raw=spec)
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

    return _Shared(HFModel(spec, s.target, adapter=s.adapter))
