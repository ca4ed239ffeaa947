"""`router.json`: a router's final state after `rescue train`, so rank-1 routing serves the trained router.

It holds what the router ranks from (the seed; the re-anchored validation table; the adaptive router's
profiles and voter specs) and the rankings it gave the training tasks at the end. Loaded back
(`rescue route --router OUT/router.json`, `run --harness route:POOL --router OUT/router.json`) it ranks
those tasks exactly as at the end of training: random and rule recompute them from the same seed and
table; the adaptive router reuses the final rankings (LLM votes are not recomputed) and asks its voters
only for tasks it has not ranked."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from unscaffold.errors import InputError
from unscaffold.iojson import load_model, write_json_atomic
from unscaffold.rescue.routers import ControlRouter, RandomRouter, Router, RuleRouter, TaskView
from unscaffold.rescue.validation import FORBIDDEN_SPLIT, ValidationTable
from unscaffold.specs import ModelSpec

ROUTER_STATE = "router.json"


class RouterState(BaseModel):
    model_config = ConfigDict(extra="forbid")
    router: str = Field(description="none, same, fixed, random, rule or adaptive")
    siblings: list[str]
    seed: int = 0
    order: list[str] = Field(default_factory=list, description="control routers: the fixed ranking")
    table: ValidationTable | None = Field(None, description="rule / adaptive: the final (re-anchored) table")
    anchors: int = 0
    profiles: dict[str, Any] = Field(default_factory=dict, description="adaptive: profile per sibling")
    voters: list[str] = Field(default_factory=list, description="adaptive: voter model specs, as their text")
    rankings: dict[str, list[str]] = Field(description="task id -> the router's final ranking of it")


def router_state(router: Router, tasks: list[TaskView], seed: int = 0,
                 voters: Sequence[ModelSpec | str] | None = None) -> RouterState:
    """The router as it stands, with its rankings of `tasks`."""
    profiles = getattr(router, "profiles", {})
    return RouterState(router=router.name, siblings=list(getattr(router, "siblings", [])), seed=seed,
                       order=list(getattr(router, "order", [])), table=getattr(router, "table", None),
                       anchors=getattr(router, "anchors", 0),
                       profiles={k: v.model_dump(mode="json") for k, v in profiles.items()},
                       voters=[str(v) for v in voters or []], rankings={t.task_id: router.rank(t) for t in tasks})


def save_router(router: Router, path: Path, tasks: list[TaskView], seed: int = 0,
                voters: Sequence[ModelSpec | str] | None = None) -> RouterState:
    state = router_state(router, tasks, seed, voters)
    write_json_atomic(path, state.model_dump(mode="json"))
    return state


def restore_router(state: RouterState, source: str = ROUTER_STATE) -> Router:
    """The router `state` describes, ranking as it did when saved."""
    if state.router == "none":
        raise InputError(source, "router", "a `none` run (plain GRPO) has no router to route with; train with "
                         "a router (random, rule or adaptive) or name one")
    if state.router == "random":
        return RandomRouter(state.siblings, state.seed)
    if state.router in ("none", "same", "fixed"):
        return ControlRouter(state.router, state.order)
    if state.table is None:
        raise InputError(ROUTER_STATE, "table", f"the {state.router} router needs its validation table")
    if state.router == "rule":
        rule = RuleRouter(state.siblings, state.table)
        rule.anchors = state.anchors
        return rule
    if state.router == "adaptive":
        from unscaffold.llm.registry import load_provider
        from unscaffold.rescue.profiles import AdaptiveRouter, Profile

        adaptive = AdaptiveRouter(state.siblings, state.table, [],
                                  [load_provider(s, flag="--voter") for s in state.voters])
        adaptive.profiles = {k: Profile.model_validate(v) for k, v in state.profiles.items()}
        adaptive._rankings = {k: list(v) for k, v in state.rankings.items()}
        adaptive.anchors = state.anchors
        return adaptive
    raise InputError(ROUTER_STATE, "router", f"unknown router {state.router!r}")


def load_router_state(path: Path, siblings: list[str]) -> Router:
    """router.json, checked against the pool it will route over."""
    state = load_model(Path(path), RouterState)
    missing = sorted(set(state.siblings) - set(siblings))
    if missing:
        raise InputError(str(path), "siblings", f"{', '.join(missing)} not in the pool being routed over")
    if state.table is not None and any(t.split == FORBIDDEN_SPLIT for t in state.table.tasks):
        raise InputError(str(path), "table", "test tasks never feed a router")
    return restore_router(state, str(path))
