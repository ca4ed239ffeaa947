"""A router by the name a command is given (`--router`), or the trained one a `rescue train` left: the one
place that knows every router module, so none of them imports another to build one."""

from __future__ import annotations

from pathlib import Path

from unscaffold.errors import InputError, did_you_mean
from unscaffold.rescue.routers import ROUTERS, RandomRouter, Router, RuleRouter
from unscaffold.rescue.validation import ValidationTable
from unscaffold.specs import ModelSpec


def load_router(name: str, siblings: list[str], table: ValidationTable | None, seed: int = 0,
                profilers: list[ModelSpec] | None = None, voters: list[ModelSpec] | None = None) -> Router:
    """A router by name, or the trained one a `rescue train` left (NAME is then the path of its router.json)."""
    if name.endswith(".json"):
        from unscaffold.rescue.router_state import load_router_state

        return load_router_state(Path(name), siblings)
    if name == "random":
        return RandomRouter(siblings, seed)
    if table is None:
        raise InputError("--router", None, f"the {name} router learns from validation runs; pass --validation")
    if name == "rule":
        return RuleRouter(siblings, table)
    if name == "adaptive":
        from unscaffold.rescue.profiles import AdaptiveRouter

        if not profilers:
            raise InputError("--profiler", None, "the adaptive router needs at least one profiling model spec")
        return AdaptiveRouter.from_specs(siblings, table, profilers, voters or profilers)
    raise InputError("--router", None, f"unknown router {name!r}; use {', '.join(ROUTERS)}"
                     f"{did_you_mean(name, ROUTERS)}")
