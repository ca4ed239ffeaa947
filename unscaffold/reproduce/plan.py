"""The plan file: every stage of a recipe as the command a user would type, its output and its inputs.

A plan is written as TOML before anything runs, so a user can read it, edit a command line and pass it back
with `--plan`. Paths inside a plan are relative to its folder (`{dir}` in a command line), so a plan folder
can be moved or copied whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from unscaffold.iojson import load_toml_model, write_text_atomic

DIR = "{dir}"  # the plan's folder in a command line, substituted when the stage runs
Recipe = Literal["harness-zero", "harness-s", "demo"]  # demo: `unscaffold demo`, run by the same executor
RECIPES: tuple[str, ...] = ("harness-zero", "harness-s")
Scale = Literal["mini", "paper"]


class Cost(BaseModel):
    """What a stage spends, estimated before it runs (the table reports what it measured)."""

    model_config = ConfigDict(extra="forbid")
    rollouts: int = Field(0, ge=0, description="student trials (episodes) the stage runs")
    reviewer_calls: int = Field(0, ge=0, description="reviewer calls at most (budget x trials)")
    training_steps: int = Field(0, ge=0, description="optimiser steps")


class Stage(BaseModel):
    """One command of the plan."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$", description="what `--from` names")
    about: str = Field("", description="one line: what the stage does")
    argv: list[str] = Field(min_length=1, description="the `unscaffold` arguments; {dir} is the plan folder")
    out: str = Field(description="the stage's output (file or folder), relative to the plan folder")
    after: list[str] = Field(default_factory=list, description="stages whose outputs this one reads")
    reads: list[str] = Field(default_factory=list, description="files or folders outside the plan it reads "
                             "(their content is part of its digest)")
    stdout: bool = Field(False, description="the command's standard output is the output file (its --json)")
    resumes: bool = Field(False, description="the command resumes itself into an unfinished output (run)")
    cost: Cost = Field(default_factory=Cost)

    def command(self, folder: Path) -> list[str]:
        return [a.replace(DIR, str(folder)) for a in self.argv]

    def shown(self, folder: Path | None = None) -> str:
        """The command line as a user would type it (`{dir}` kept when no folder is given)."""
        import shlex

        argv = self.argv if folder is None else self.command(folder)
        line = " ".join(shlex.quote(a) for a in ["unscaffold", *argv])
        return line + (f" > {shlex.quote(self.out)}" if self.stdout else "")


class Plan(BaseModel):
    """A recipe's stages over one base model, one split and one evaluation budget."""

    model_config = ConfigDict(extra="forbid")
    recipe: Recipe
    suite: str
    scale: Scale
    model: str = Field(description="the base model both recipes start from")
    train: list[str] = Field(description="train task ids (collection, training, routers)")
    test: list[str] = Field(description="test task ids (every evaluation)")
    eval_trials: int = Field(1, ge=1, description="trials per test task in every evaluation")
    stages: list[Stage] = Field(min_length=1)

    @model_validator(mode="after")
    def _names_and_order(self) -> Plan:
        seen: set[str] = set()
        for stage in self.stages:
            if stage.name in seen:
                raise ValueError(f"stage {stage.name!r} is named twice")
            unknown = [a for a in stage.after if a not in seen]
            if unknown:
                raise ValueError(f"stage {stage.name!r} reads {unknown[0]!r}, which is not an earlier stage")
            seen.add(stage.name)
        overlap = sorted(set(self.train) & set(self.test))
        if overlap:
            raise ValueError(f"task {overlap[0]!r} is in both train and test ({len(overlap)} shared)")
        return self

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    def estimate(self) -> Cost:
        return Cost(**{f: sum(getattr(s.cost, f) for s in self.stages) for f in Cost.model_fields})


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def plan_toml(plan: Plan) -> str:
    """The plan as TOML: the settings at the top, then one [[stages]] table a stage."""
    data = plan.model_dump(mode="json")
    lines = [f"# unscaffold reproduce {plan.recipe} --suite {plan.suite} --scale {plan.scale}",
             "# Edit a command line and rerun with --plan: that stage and every stage after it that reads it rerun.",
             ""]
    lines += [f"{k} = {_toml_value(v)}" for k, v in data.items() if k != "stages"]
    for stage in data["stages"]:
        lines += ["", "[[stages]]"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in stage.items() if k != "cost"]
        lines += [f"cost = {{ {', '.join(f'{k} = {v}' for k, v in stage['cost'].items())} }}"]
    return "\n".join(lines) + "\n"


def write_plan(plan: Plan, path: Path) -> None:
    write_text_atomic(path, plan_toml(plan))


def load_plan(path: Path) -> Plan:
    return load_toml_model(path, Plan, missing="plan file not found")
