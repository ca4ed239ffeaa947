"""`--reviewer`: passthrough, rules, cascade:SPEC, or a model spec (replay:FILE, openai:, anthropic:, hf:)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import model_validator

from unscaffold.errors import InputError
from unscaffold.specs.base import Spec, closest_spelling
from unscaffold.specs.model import SCHEMES, ModelSpec

FLAG = "--reviewer"
USAGE = ("expected passthrough, rules, cascade:SPEC, replay:FILE, openai:MODEL[@BASE_URL], anthropic:MODEL "
         "or hf:PATH[+ADAPTER]")
WORDS = ("passthrough", "rules")  # the built-in reviewers, which need no model


class ReviewerSpec(Spec):
    """Which reviewer: a built-in one, a cascade around another (`inner`), or a model (`model`)."""

    FLAG = FLAG
    kind: Literal["passthrough", "rules", "cascade", "model"]
    inner: ReviewerSpec | None = None
    model: ModelSpec | None = None

    @model_validator(mode="after")
    def _parts(self) -> Self:
        if (self.kind == "cascade") != (self.inner is not None) or (self.kind == "model") != (self.model is not None):
            raise ValueError("a cascade names its inner reviewer, a model reviewer its model, and no other kind "
                             "either")
        return self

    @classmethod
    def parse(cls, text: str, *, flag: str | None = None) -> Self:
        flag = flag or cls.FLAG
        if text in WORDS:
            return cls(kind=text)  # one of WORDS
        if text.startswith("cascade:"):
            inner = text.removeprefix("cascade:")
            if not inner or inner.startswith("cascade:"):
                raise InputError(flag, None, f"reviewer spec {text!r}: cascade wraps one reviewer spec, e.g. "
                                 "cascade:openai:MODEL")
            return cls(kind="cascade", inner=cls.parse(inner, flag=flag))
        if text.partition(":")[0] not in SCHEMES:
            raise InputError(flag, None, f"unknown reviewer spec {text!r}; {USAGE}"
                             + closest_spelling(text, [*SCHEMES, "cascade"], WORDS))
        return cls(kind="model", model=ModelSpec.parse(text, flag=flag))

    def __str__(self) -> str:
        if self.kind == "cascade":
            return f"cascade:{self.inner}"
        return str(self.model) if self.kind == "model" else self.kind

    @property
    def models(self) -> list[ModelSpec]:
        """The model this reviewer calls, if any (a cascade's inner one)."""
        if self.inner is not None:
            return self.inner.models
        return [self.model] if self.model is not None else []
