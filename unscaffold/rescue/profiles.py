"""The adaptive router: per-sibling behaviour profiles written by LLMs, and LLMs voting with them.

A profile holds "prefer" and "avoid" entries, each `When` (a task condition) / `Behavior` (what the
sibling makes the student do differently). Profiles are written from paired validation trajectories:
the same validation task under the base harness and under the sibling, where the outcomes differ.
Several profiling LLMs each write one; their entries are pooled. For a task, each voting LLM submits
its top-k with the profiles in view; rankings are merged by Borda count, ties in pool order. When no
voter gives a valid ranking the rule router's order stands. `reanchor` rewrites the profiles from a
new validation table (the current policy's runs at a checkpoint); test tasks never reach a table."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from unscaffold.llm.base import ModelProvider
from unscaffold.llm.registry import load_provider
from unscaffold.llm.types import Message
from unscaffold.rescue.pool import BASE
from unscaffold.rescue.routers import RuleRouter, TaskView
from unscaffold.rescue.validation import ValidationTable
from unscaffold.specs import ModelSpec

TRIES = 3
MAX_PAIRS = 6


class ProfileEntry(BaseModel):
    when: str = Field(min_length=1, max_length=400)
    behavior: str = Field(min_length=1, max_length=400)


class Profile(BaseModel):
    prefer: list[ProfileEntry] = Field(default_factory=list, max_length=8)
    avoid: list[ProfileEntry] = Field(default_factory=list, max_length=8)


class Ranking(BaseModel):
    ranking: list[str] = Field(min_length=1)


def _tool(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


ENTRY = {"type": "object", "properties": {"when": {"type": "string"}, "behavior": {"type": "string"}},
         "required": ["when", "behavior"]}
PROFILE_TOOL = _tool("submit_profile", "Submit the sibling harness's behaviour profile.", {
    "type": "object", "properties": {"prefer": {"type": "array", "items": ENTRY},
                                     "avoid": {"type": "array", "items": ENTRY}}, "required": ["prefer", "avoid"]})
RANKING_TOOL = _tool("submit_ranking", "Submit the harnesses to try, best first.", {
    "type": "object", "properties": {"ranking": {"type": "array", "items": {"type": "string"}}},
    "required": ["ranking"]})

PROFILE_PROMPT = (
    "You compare an agent's behaviour under a base harness and under one sibling harness on the same "
    "validation tasks. Write the sibling's profile: `prefer` entries for task conditions where the sibling "
    "helps, `avoid` entries where it hurts. Each entry is When (a condition on the task, visible in its "
    "instruction) and Behavior (what the agent does differently under the sibling). Submit with submit_profile."
)
VOTE_PROMPT = (
    "A task failed under the base harness in every attempt. Using the harness profiles, rank the harnesses "
    "most likely to succeed on it, best first (`base` is the base harness). Submit with submit_ranking."
)


def paired_examples(table: ValidationTable, sibling: str) -> list[str]:
    """Validation tasks where the base harness and the sibling differ in outcome, with what each did."""
    out = []
    for t in table.tasks:
        base, mine = t.success_rate(BASE), t.success_rate(sibling)
        if base is None or mine is None or base == mine:
            continue
        out.append(f"## Task {t.task_id}\n{t.text}\n\nbase: {base:.0%} success\n{t.transcripts.get(BASE, '')}\n\n"
                   f"{sibling}: {mine:.0%} success\n{t.transcripts.get(sibling, '')}")
    return out[:MAX_PAIRS]


class CallMeter(BaseModel):
    """The router's LLM calls and their tokens: part of a training's cost."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


def ask(provider: ModelProvider, key: str, prompt: str, user: str, tool: dict[str, Any],
        schema: type[BaseModel], meter: CallMeter | None = None) -> BaseModel | None:
    """One structured answer, sent back with its error up to TRIES times; None when it never validates."""
    model = provider.for_trial(key)
    messages = [Message(role="system", content=prompt), Message(role="user", content=user)]
    for _ in range(TRIES):
        response = model.complete(messages, [tool])
        if meter is not None:
            meter.calls += 1
            meter.input_tokens += response.usage.input_tokens
            meter.output_tokens += response.usage.output_tokens
        call = response.tool_calls[0] if response.tool_calls else None
        try:
            if call is None or call.name != tool["function"]["name"] or call.arguments is None:
                raise ValueError(f"answer with one {tool['function']['name']} call")
            return schema.model_validate(call.arguments)
        except (ValueError, ValidationError) as e:
            messages += [response.to_message()]
            if call is not None:
                messages.append(Message(role="tool", tool_call_id=call.id, name=call.name, content=f"Error: {e}"))
            else:
                messages.append(Message(role="user", content=f"Error: {e}"))
    return None


def render_profiles(profiles: dict[str, Profile]) -> str:
    parts = []
    for name, p in profiles.items():
        lines = [f"### {name}"]
        lines += [f"- prefer: When {e.when} / Behavior {e.behavior}" for e in p.prefer]
        lines += [f"- avoid: When {e.when} / Behavior {e.behavior}" for e in p.avoid]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


class AdaptiveRouter:
    name = "adaptive"

    def __init__(self, siblings: list[str], table: ValidationTable, profilers: list[ModelProvider],
                 voters: list[ModelProvider]) -> None:
        self.siblings, self.profilers, self.voters = list(siblings), profilers, voters
        self.anchors = 0
        self.invalid_votes = 0
        self.meter = CallMeter()
        self.reanchor(table)

    @classmethod
    def from_specs(cls, siblings: list[str], table: ValidationTable, profilers: list[ModelSpec],
                   voters: list[ModelSpec]) -> AdaptiveRouter:
        return cls(siblings, table, [load_provider(s, flag="--profiler") for s in profilers],
                   [load_provider(s, flag="--voter") for s in voters])

    def reanchor(self, table: ValidationTable) -> None:
        """Rewrite every profile from this table (the current policy's validation runs)."""
        self.table = table
        self.fallback = RuleRouter(self.siblings, table)
        self._rankings: dict[str, list[str]] = {}  # a task's ranking holds until the next re-anchoring
        self._points: dict[str, dict[str, float]] = {}  # its Borda points (or the rule fallback's rates)
        self.profiles: dict[str, Profile] = {}
        for sibling in self.siblings:
            pairs = paired_examples(table, sibling)
            merged = Profile()
            for provider in self.profilers:
                if not pairs:
                    break
                got = ask(provider, f"profile:{sibling}", PROFILE_PROMPT,
                          f"Sibling harness: {sibling}\n\n" + "\n\n".join(pairs), PROFILE_TOOL, Profile, self.meter)
                if isinstance(got, Profile):
                    merged.prefer += [e for e in got.prefer if e not in merged.prefer]
                    merged.avoid += [e for e in got.avoid if e not in merged.avoid]
            self.profiles[sibling] = merged
        self.anchors += 1

    def rank(self, task: TaskView) -> list[str]:
        if task.task_id not in self._rankings:
            self._rankings[task.task_id] = self._vote(task)
        return list(self._rankings[task.task_id])

    def scores(self, task: TaskView) -> dict[str, float]:
        """The votes behind the task's ranking (Borda points), so a tie reads as undecided, never as a choice."""
        self.rank(task)
        return dict(self._points.get(task.task_id, {}))

    def _vote(self, task: TaskView) -> list[str]:
        candidates = [BASE, *self.siblings]
        points = dict.fromkeys(candidates, 0)
        valid = 0
        user = (f"Task {task.task_id}:\n{task.text}\n\nHarnesses: {', '.join(candidates)}\n\n"
                f"Profiles:\n{render_profiles(self.profiles)}")
        for provider in self.voters:
            got = ask(provider, f"vote:{task.task_id}", VOTE_PROMPT, user, RANKING_TOOL, Ranking, self.meter)
            names = list(dict.fromkeys(n for n in got.ranking if n in points)) if isinstance(got, Ranking) else []
            if not names:
                self.invalid_votes += 1
                continue
            valid += 1
            for position, name in enumerate(names):  # Borda: first of n gets n points
                points[name] += len(candidates) - position
        if not valid:
            self._points[task.task_id] = self.fallback.scores(task)
            return self.fallback.rank(task)
        self._points[task.task_id] = {h: float(v) for h, v in points.items()}
        order = {h: i for i, h in enumerate(candidates)}
        return sorted(candidates, key=lambda h: (-points[h], order[h]))

    def describe(self) -> dict[str, Any]:
        return {"anchors": self.anchors, "invalid_votes": self.invalid_votes,
                "profiles": {k: json.loads(v.model_dump_json()) for k, v in self.profiles.items()}}
