"""What the hosted backends (an SDK client over HTTP) share: how they are reached and retried. The keywords
are declared once here so every such backend takes the same ones with the same defaults."""

from __future__ import annotations

from typing import Any, TypedDict

from unscaffold.llm.retry import Backoff
from unscaffold.llm.sampling import Sampling


class Endpoint(TypedDict, total=False):
    """Keywords every hosted backend takes; a missing one has the default `HostedModel` gives it."""

    base_url: str | None
    api_key: str | None
    sampling: Sampling
    timeout_s: float
    backoff: Backoff


class HostedModel:
    """Keeps the spec, model, sampling settings and backoff, and opens the SDK client once with its own retries
    off, so `Backoff` alone decides when to try again."""

    def __init__(self, spec: str, model: str, endpoint: Endpoint) -> None:
        self.spec, self.model = spec, model
        self.sampling = endpoint.get("sampling") or Sampling()
        self.backoff = endpoint.get("backoff", Backoff())
        self.client = self.connect(endpoint.get("base_url"), endpoint.get("api_key"),
                                   endpoint.get("timeout_s", 600.0))

    def connect(self, base_url: str | None, api_key: str | None, timeout_s: float) -> Any:
        """The SDK client (with `max_retries=0`); raises AuthError where no key can be found."""
        raise NotImplementedError
