"""Sampling settings of a model: temperature, top_p, max tokens a turn and a seed. Given in a model spec's
query (`openai:M@URL?temperature=0.7&top_p=0.95&max_tokens=1024&seed=1`, the same for `anthropic:` and `hf:`)
or, for the student, by `run --temperature --top-p --max-tokens --sampling-seed`; unset means the backend's
own default (hosted: the server's; `hf:` greedy, 2,048 new tokens)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unscaffold.errors import InputError
from unscaffold.flags import flag

# `hf:` took `max_new_tokens` before the settings were shared; it stays a name of `max_tokens`.
ALIASES = {"max_new_tokens": "max_tokens"}


class Sampling(BaseModel):
    """How a model samples each turn. Each field is documented once, here: `run` builds its options from them
    and a spec's query takes the same names."""

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(None, ge=0, description="Sampling temperature of the student (0: greedy; "
                                      "default: the backend's own, greedy for hf:).",
                                      json_schema_extra=flag("--temperature"))
    top_p: float | None = Field(None, gt=0, le=1, description="Nucleus sampling: the probability mass sampled "
                                "from (default: the backend's own).", json_schema_extra=flag("--top-p"))
    max_tokens: int | None = Field(None, ge=1, description="Tokens the student may generate per turn (default: "
                                   "the backend's own; 2,048 for hf:).", json_schema_extra=flag("--max-tokens"))
    seed: int | None = Field(None, description="Seed of the student's sampling: sent to OpenAI-compatible "
                             "servers, seeds hf: generation; the Anthropic API takes none.",
                             json_schema_extra=flag("--sampling-seed"))

    def given(self) -> dict[str, Any]:
        """The settings that are set, by name."""
        return self.model_dump(exclude_none=True)

    @property
    def samples(self) -> bool:
        """Whether generation draws at random (a temperature above 0)."""
        return bool(self.temperature)

    def merged(self, other: Sampling, *, flag: str) -> Sampling:
        """These settings with `other`'s added; one setting given both ways with two values is refused."""
        mine, theirs = self.given(), other.given()
        for name in sorted(mine.keys() & theirs.keys()):
            if mine[name] != theirs[name]:
                raise InputError(flag, None, f"{name} is {mine[name]} in the spec and {theirs[name]} as an option; "
                                 "give it once")
        return Sampling(**{**theirs, **mine})


def parse_sampling(query: str, *, flag: str, scheme: str) -> Sampling:
    """A spec's `?a=1&b=2` as settings; an unknown name or a bad value is one line naming the option."""
    values: dict[str, str] = {}
    for part in filter(None, query.split("&")):
        key, sep, value = part.partition("=")
        name = ALIASES.get(key, key) if scheme == "hf" else key
        if not sep or name not in Sampling.model_fields:
            extra = ", server=" if scheme == "openai" else ""
            raise InputError(flag, None, f"unknown {scheme} option {key!r}; expected temperature=, top_p=, "
                             f"max_tokens=, seed={extra}")
        values[name] = value
    try:
        return Sampling.model_validate(values)
    except ValidationError as e:
        error = e.errors()[0]
        name = str(error["loc"][0])
        raise InputError(flag, None, f"{scheme} {name} {values[name]!r}: {error['msg']}") from None
