"""The reviewer a `--reviewer` spec names (its grammar and typed form: unscaffold/specs/reviewer.py)."""

from __future__ import annotations

from pathlib import Path

from unscaffold.reviewer.base import ReviewerFactory, SharedReviewer
from unscaffold.specs.reviewer import FLAG, ReviewerSpec


def load_reviewer(given: ReviewerSpec | str) -> ReviewerFactory:
    """A factory whose `for_trial(task_id)` gives each trial its own reviewer."""
    spec = given if isinstance(given, ReviewerSpec) else ReviewerSpec.parse(given, flag=FLAG)
    if spec.kind == "passthrough":
        from unscaffold.reviewer.passthrough import PassthroughReviewer

        return SharedReviewer(PassthroughReviewer())
    if spec.kind == "rules":
        from unscaffold.reviewer.rules import RulesReviewer

        return SharedReviewer(RulesReviewer())
    if spec.inner is not None:
        from unscaffold.reviewer.cascade import CascadeFactory

        return CascadeFactory(load_reviewer(spec.inner))
    assert spec.model is not None  # the only kind left
    if spec.model.kind == "replay":
        from unscaffold.reviewer.replay_reviewer import ReplayReviewerFactory

        return ReplayReviewerFactory(str(spec.model), Path(spec.model.target), spec.model.latency_s)
    from unscaffold.reviewer.llm import LLMReviewerFactory

    return LLMReviewerFactory(spec.model)
