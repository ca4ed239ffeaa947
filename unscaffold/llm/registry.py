"""Model specs: `openai:MODEL[@BASE_URL]`, `anthropic:MODEL`, `hf:PATH[+ADAPTER]`, each with an optional
`?temperature=T&top_p=P&max_tokens=N&seed=S` (see sampling.py; `openai:` also `server=vllm|sglang`), and
`replay:FILE[?latency=S]`."""

from __future__ import annotations

import typing
from pathlib import Path

from pydantic import BaseModel

from unscaffold.errors import InputError
from unscaffold.llm.base import Model, ModelProvider
from unscaffold.llm.sampling import Sampling, parse_sampling
from unscaffold.llm.types import ServerKind

SCHEMES = ("openai", "anthropic", "hf", "replay")


class ModelSpec(BaseModel):
    scheme: str
    target: str
    base_url: str | None = None
    adapter: str | None = None
    latency_s: float = 0.0
    sampling: Sampling = Sampling()
    server: ServerKind | None = None  # openai: the server's kind, when known
    raw: str

    @property
    def max_new_tokens(self) -> int | None:
        """`hf:`'s name for the tokens a turn."""
        return self.sampling.max_tokens


def parse_spec(spec: str, *, flag: str = "--student") -> ModelSpec:
    scheme, sep, rest = spec.partition(":")
    if not sep or scheme not in SCHEMES or not rest:
        raise InputError(flag, None, f"unknown model spec {spec!r}; expected one of "
                         "openai:MODEL[@BASE_URL], anthropic:MODEL, hf:PATH[+ADAPTER], replay:FILE")
    server: ServerKind | None = None
    if scheme != "replay":
        rest, _, query = rest.partition("?")
        if scheme == "openai":
            server, query = _server_kind(query, flag)
        sampling = parse_sampling(query, flag=flag, scheme=scheme)
        if not rest:
            raise InputError(flag, None, f"model spec {spec!r} names no model")
    if scheme == "openai":
        model, _, url = rest.partition("@")
        return ModelSpec(scheme=scheme, target=model, base_url=url or None, sampling=sampling, raw=spec,
                         server=server)
    if scheme == "hf":
        path, _, adapter = rest.partition("+")
        return ModelSpec(scheme=scheme, target=path, adapter=adapter or None, sampling=sampling, raw=spec)
    if scheme == "anthropic":
        return ModelSpec(scheme=scheme, target=rest, sampling=sampling, raw=spec)
    # replay:FILE[?latency=S]
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


def _server_kind(query: str, flag: str) -> tuple[ServerKind | None, str]:
    """`server=vllm|sglang` out of an `openai:` query (which field the server reads earlier reasoning from;
    else both are sent), and the rest of the query."""
    server: ServerKind | None = None
    rest = []
    for part in filter(None, query.split("&")):
        key, _, value = part.partition("=")
        if key != "server":
            rest.append(part)
            continue
        kinds = typing.get_args(ServerKind)
        if value not in kinds:
            raise InputError(flag, None, f"openai server {value!r} is not one of {', '.join(kinds)}")
        server = typing.cast(ServerKind, value)
    return server, "&".join(rest)


def anthropic_version() -> str:
    from importlib.metadata import version

    return version("anthropic")


class _Shared:
    """A stateless backend serves every trial itself."""

    def __init__(self, model: Model) -> None:
        self.model, self.spec = model, model.spec

    def for_trial(self, task_id: str) -> Model:
        return self.model


def load_provider(spec: str, *, flag: str = "--student", sampling: Sampling | None = None) -> ModelProvider:
    """The backend of a spec; `sampling` (a command's options) adds to the spec's own query settings."""
    s = parse_spec(spec, flag=flag)
    settings = s.sampling.merged(sampling, flag=flag) if sampling is not None else s.sampling
    if s.scheme == "replay":
        if settings.given():
            raise InputError(flag, None, f"{spec}: a replay plays recorded responses; sampling settings "
                             f"({', '.join(settings.given())}) do not apply")
        from unscaffold.llm.replay import ReplayProvider

        return ReplayProvider(spec, Path(s.target), s.latency_s)
    if s.scheme == "openai":
        from unscaffold.llm.openai_backend import OpenAIModel

        return _Shared(OpenAIModel(spec, s.target, base_url=s.base_url, server=s.server, sampling=settings))
    if s.scheme == "anthropic":
        from unscaffold.llm.anthropic_backend import AnthropicModel, sdk_sampling

        refused = sorted(set(settings.given()) - sdk_sampling())
        if refused:
            raise InputError(flag, None, f"{spec}: the installed anthropic SDK ({anthropic_version()}) sends no "
                             f"{', '.join(refused)}; leave {'them' if len(refused) > 1 else 'it'} out")

        return _Shared(AnthropicModel(spec, s.target, sampling=settings))
    from unscaffold.llm.hf_backend import HFModel

    return _Shared(HFModel(spec, s.target, adapter=s.adapter, sampling=settings))
