"""The backend of a model spec (its grammar and typed form: unscaffold/specs/model.py)."""

from __future__ import annotations

from pathlib import Path

from unscaffold.errors import InputError
from unscaffold.llm.base import Model, ModelProvider
from unscaffold.llm.sampling import Sampling
from unscaffold.specs.model import ModelSpec


def anthropic_version() -> str:
    from importlib.metadata import version

    return version("anthropic")


class _Shared:
    """A stateless backend serves every trial itself."""

    def __init__(self, model: Model) -> None:
        self.model, self.spec = model, model.spec

    def for_trial(self, task_id: str) -> Model:
        return self.model


def load_provider(given: ModelSpec | str, *, flag: str = "--student",
                  sampling: Sampling | None = None) -> ModelProvider:
    """The backend of a spec (its text is parsed, errors naming `flag`); `sampling` (a command's options) adds to
    the spec's own query settings."""
    s = given if isinstance(given, ModelSpec) else ModelSpec.parse(given, flag=flag)
    spec = str(s)
    if s.kind == "oracle":
        raise InputError(flag, None, "oracle runs a suite's reference solutions: only a run's student can be one")
    settings = s.sampling.merged(sampling, flag=flag) if sampling is not None else s.sampling
    if s.kind == "replay":
        if settings.given():
            raise InputError(flag, None, f"{spec}: a replay plays recorded responses; sampling settings "
                             f"({', '.join(settings.given())}) do not apply")
        from unscaffold.llm.replay import ReplayProvider

        return ReplayProvider(spec, Path(s.target), s.latency_s)
    if s.kind == "openai":
        from unscaffold.llm.openai_backend import OpenAIModel

        return _Shared(OpenAIModel(spec, s.target, base_url=s.base_url, server=s.server, sampling=settings))
    if s.kind == "anthropic":
        from unscaffold.llm.anthropic_backend import AnthropicModel, sdk_sampling

        refused = sorted(set(settings.given()) - sdk_sampling())
        if refused:
            raise InputError(flag, None, f"{spec}: the installed anthropic SDK ({anthropic_version()}) sends no "
                             f"{', '.join(refused)}; leave {'them' if len(refused) > 1 else 'it'} out")

        return _Shared(AnthropicModel(spec, s.target, sampling=settings))
    from unscaffold.llm.hf_backend import HFModel

    return _Shared(HFModel(spec, s.target, adapter=s.adapter, sampling=settings))
