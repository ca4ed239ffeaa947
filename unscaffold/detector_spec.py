"""What a bank declares a behaviour detector to be (`detector = {...}` beside a component).

The bank loader (`knowledge/bank.py`) reads it and the behaviour layer (`behaviors/detector.py`) runs it, so it
lives apart from both: neither imports the other for it. A `predicate` must name one of the suites' behaviour
predicates, which the suite registry collects from each suite folder's detectors module."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from unscaffold.suites import predicates


class DetectorSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str = Field(min_length=1)
    tools: list[str] = Field(default_factory=list, description="calling any of these h* tools shows it")
    commands: list[str] = Field(default_factory=list, description="regexes each matched by some student action")
    ordered: bool = Field(False, description="the `commands` matches must come in this order")
    after_last: str | None = Field(None, description="only actions after the last one matching this count")
    observations: str | None = Field(None, description="some tool result must also match this regex")
    final_answer_lacks: str | None = Field(None, description="the episode ended with an answer not matching this")
    within_turns: int | None = Field(None, ge=1, description="the episode ended with an answer by this turn")
    predicate: str | None = Field(None, description="a behaviour predicate (a suite's detectors module, found "
                                  "through the suite registry) decides what the actions show (instead of `commands`)")
    params: dict[str, Any] = Field(default_factory=dict, description="the predicate's parameters")
    _scripts: dict[str, list[tuple[str, set[str]]]] = PrivateAttr(default_factory=dict)

    @field_validator("predicate")
    @classmethod
    def _known(cls, value: str | None) -> str | None:
        known = predicates()
        if value is not None and value not in known:
            raise ValueError(f"unknown predicate {value!r}; known: {', '.join(sorted(known))}")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> DetectorSpec:
        if self.predicate and (self.tools or self.commands or self.ordered or self.after_last):
            raise ValueError("a predicate detector takes no tools, commands, ordered or after_last (the predicate "
                             "places the bank's tool calls in the order itself)")
        return self

    def with_scripts(self, scripts: dict[str, list[tuple[str, set[str]]]]) -> DetectorSpec:
        """The bank's tool scripts (source -> tools running it), so a recipe run counts as the tool's call."""
        self._scripts = scripts
        return self

    @field_validator("commands")
    @classmethod
    def _regexes(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as e:
                raise ValueError(f"invalid regular expression {pattern!r}: {e}") from None
        return value
