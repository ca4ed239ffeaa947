"""Reviewer specs for `--reviewer`: passthrough, rules, cascade:SPEC, replay:FILE, or a model spec."""

from __future__ import annotations

from pathlib import Path

from unscaffold.errors import InputError
from unscaffold.llm.registry import parse_spec
from unscaffold.reviewer.base import ReviewerFactory, SharedReviewer

FLAG = "--reviewer"
USAGE = ("expected passthrough, rules, cascade:SPEC, replay:FILE, openai:MODEL[@BASE_URL], anthropic:MODEL "
         "or hf:PATH[+ADAPTER]")


def load_reviewer(spec: str) -> ReviewerFactory:
    """A factory whose `for_trial(task_id)` gives each trial its own reviewer."""
    if spec == "passthrough":
        from unscaffold.reviewer.passthrough import PassthroughReviewer

        return SharedReviewer(PassthroughReviewer())
    if spec == "rules":
        from unscaffold.reviewer.rules import RulesReviewer

        return SharedReviewer(RulesReviewer())
    if spec.startswith("cascade:"):
        from unscaffold.reviewer.cascade import CascadeFactory

        inner = spec.removeprefix("cascade:")
        if not inner or inner.startswith("cascade:"):
            raise InputError(FLAG, None, f"reviewer spec {spec!r}: cascade wraps one reviewer spec, e.g. "
                             "cascade:openai:MODEL")
        return CascadeFactory(load_reviewer(inner))
    scheme = spec.partition(":")[0]
    if scheme not in ("replay", "openai", "anthropic", "hf"):
        raise InputError(FLAG, None, f"unknown reviewer spec {spec!r}; {USAGE}")
    parsed = parse_spec(spec, flag=FLAG)
    if parsed.scheme == "replay":
        from unscaffold.reviewer.replay_reviewer import ReplayReviewerFactory

        return ReplayReviewerFactory(spec, Path(parsed.target), parsed.latency_s)
    from unscaffold.reviewer.llm import LLMReviewerFactory

    return LLMReviewerFactory(spec)
