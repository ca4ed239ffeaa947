"""What every option spec shares: parsed once from its command-line text (with a one-line error naming the
option), given back as that text by `str()`, and written to JSON as an object of its typed fields (a
`config.json` of an earlier version, which holds the text, still reads)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Self, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from unscaffold.errors import did_you_mean


def closest_spelling(text: str, prefixes: Iterable[str], words: Iterable[str] = ()) -> str:
    """`; did you mean X?` for a mistyped word or `PREFIX:` (the rest of `text` kept), else nothing."""
    head, sep, rest = text.partition(":")
    candidates = [*words, *(f"{prefix}:{rest}" for prefix in prefixes)] if sep else [*words, *prefixes]
    return did_you_mean(text if sep else head, [c for c in candidates if c != text])  # never the text itself


class Spec(BaseModel):
    """An option's value, typed. Subclasses give `parse` (the option's grammar) and `__str__` (its canonical
    text: `str(Spec.parse(text)) == text` for every canonical spelling)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    FLAG: ClassVar[str]  # the option named by errors when the caller names none
    STORED: ClassVar[dict[str, Any]] = {}  # `parse` options for a text read back from disk (a student's oracle)

    @classmethod
    def parse(cls, text: str, *, flag: str | None = None) -> Self:
        raise NotImplementedError

    def __str__(self) -> str:
        raise NotImplementedError

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        """The option's text (as earlier config.json files hold it) reads as the typed spec."""
        return dict(cls.parse(data, **cls.STORED)) if isinstance(data, str) else data

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Only the fields that say something: `{"kind": "tiny", "template": "qwen3"}`."""
        dumped = handler(self)
        return {name: value for name, value in dumped.items()
                if name not in type(self).model_fields or name == "kind"
                or getattr(self, name) != type(self).model_fields[name].get_default(call_default_factory=True)}


S = TypeVar("S", bound=Spec)


def read_as(spec: type[S], flag: str, **options: Any) -> BeforeValidator:
    """A settings field's validator: its text parsed as `spec`, errors naming `flag` (e.g. `--editor`)."""

    def parse(value: Any) -> Any:
        return spec.parse(value, flag=flag, **options) if isinstance(value, str) else value

    return BeforeValidator(parse)


def number(value: float) -> str:
    """A number as a spec spells it: `1`, not `1.0`; `0.7` as typed."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def query(pairs: list[tuple[str, Any]]) -> str:
    """`?a=1&b=2` of the pairs whose value is set, or nothing."""
    given = [f"{key}={number(v) if isinstance(v, float) else v}" for key, v in pairs if v is not None]
    return f"?{'&'.join(given)}" if given else ""

