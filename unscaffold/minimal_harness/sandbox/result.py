"""The outcome of one command. A plain class: the in-sandbox shell server imports it cheaply."""

from __future__ import annotations

from unscaffold.minimal_harness.sandbox.output import cut_output

FIELDS = ("output", "exit_code", "timed_out", "elided_chars", "duration_s")


class ExecResult:
    __slots__ = FIELDS

    def __init__(
        self, output: str, exit_code: int, timed_out: bool = False, elided_chars: int = 0, duration_s: float = 0.0
    ) -> None:
        self.output, self.exit_code, self.timed_out = output, exit_code, timed_out
        self.elided_chars, self.duration_s = elided_chars, duration_s

    def observation(self, cut_chars: int | None = None) -> str:
        """The text the student sees: output (cut to `cut_chars`, head and tail, when given), then the exit
        code."""
        return f"{cut_output(self.output, cut_chars, self.elided_chars)}\n[exit_code={self.exit_code}]"

    def to_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in FIELDS}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExecResult) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"ExecResult({', '.join(f'{k}={v!r}' for k, v in self.to_dict().items())})"
