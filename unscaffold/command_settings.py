"""The settings of the smaller commands, one model per command: each field with a `flag` is an option (its
description the help, its default the default), the others are the command's arguments. The larger commands
keep theirs beside what they drive (RunConfig, TrainConfig, EvolveConfig, RescueTrainConfig, RouteConfig,
DemoConfig)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

from unscaffold.flags import flag
from unscaffold.minimal_harness.sandbox.base import DEFAULT_COMMAND_TIMEOUT_S
from unscaffold.specs import WeightsSpec, read_as

# `exec` and `compile-k` check the kind themselves, to say in one line which kinds exist.
SandboxName = Annotated[str, Field(description="Sandbox: local (bubblewrap), docker, or none (no isolation).",
                                   json_schema_extra=flag("--sandbox"))]
AsJson = Annotated[bool, Field(description="Print the result as JSON.", json_schema_extra=flag("--json"))]
HtmlPage = Annotated[Path | None, Field(description="Write a self-contained HTML page here.",
                                        json_schema_extra=flag("--out"))]
TRIAL_RULE_HELP = "With several trials per task, a task shows a behaviour when any of them does, or the majority."
TrialRule = Annotated[str, Field(description=f"{TRIAL_RULE_HELP} any or majority.", json_schema_extra=flag("--rule"))]
MinEligible = Annotated[int, Field(ge=1, description="Behaviour recovery: drop behaviours with fewer eligible tasks.",
                                   json_schema_extra=flag("--min-eligible"))]
Bank = Annotated[Path | None, Field(description="h* bank for behaviour recovery (default: the one the base + h* run "
                                    "used; one suite only).", json_schema_extra=flag("--bank"))]
Taught = Annotated[Path | None, Field(description="build-sft rows the trained model learnt from: each behaviour is "
                                      "counted over them; one no row shows reads never taught.",
                                      json_schema_extra=flag("--taught"))]


class ExecSettings(BaseModel):
    """`unscaffold exec`: one command as the harness would run it."""

    command: list[str] = Field(description="The command (after --).")
    network: bool = Field(False, description="Allow network access.", json_schema_extra=flag("--network"))
    timeout: float = Field(DEFAULT_COMMAND_TIMEOUT_S, gt=0, description="Seconds before the process group is killed.",
                           json_schema_extra=flag("--timeout"))
    workspace: Path | None = Field(None, description="Workspace folder (default: a new temporary one, removed once "
                                   "the command has run).", json_schema_extra=flag("--workspace"))
    sandbox: SandboxName = "local"


class ImageSettings(BaseModel):
    """`unscaffold image base|suites`: where the Debian of the images comes from."""

    mirror: str | None = Field(None, description="Debian mirror (default: the one this machine's apt uses).",
                               json_schema_extra=flag("--mirror"))
    suite: str | None = Field(None, description="Debian release (default: this machine's).",
                              json_schema_extra=flag("--suite"))


class ExportAtifSettings(BaseModel):
    """`unscaffold export-atif`: a run's trajectories as ATIF."""

    run_dir: Path = Field(description="A run folder.")
    out: Path | None = Field(None, description="Folder for the ATIF files (default: beside each trial).",
                             json_schema_extra=flag("--out"))


class CompileKSettings(BaseModel):
    """`unscaffold compile-k`: an h* bank into K, checked and optionally linted against a suite."""

    bank: Path = Field(description="An h* bank folder (with manifest.toml).")
    out: Path = Field(description="Where to write K (replaced atomically).", json_schema_extra=flag("--out"))
    sandbox: SandboxName = "local"
    verify: bool = Field(True, description="Run each tool and its recipe on the tool's examples.",
                         json_schema_extra=flag("--verify/--no-verify"))
    suite: str | None = Field(None, description="Lint K against this suite's task ids and gold answers.",
                              json_schema_extra=flag("--suite"))
    data: Path | None = Field(None, description="The suite's data, for the lint.", json_schema_extra=flag("--data"))


class BuildSftSettings(BaseModel):
    """`unscaffold build-sft`: which trials of reviewed runs become SFT rows."""

    run_dirs: list[Path] = Field(description="Run folders (collections) to read.")
    out: Path = Field(description="DATA.jsonl to write (DATA.report.json goes beside it).",
                      json_schema_extra=flag("--out"))
    min_reward: float = Field(1.0, description="Keep trials with at least this reward.",
                              json_schema_extra=flag("--min-reward"))
    keep_all: bool = Field(False, description="Keep every trial that has a trajectory, whatever its reward or "
                           "ending; those that cannot be kept are named with why.",
                           json_schema_extra=flag("--keep-all"))
    audit: list[str] = Field(default_factory=list, description="An extra filter beyond the recipe's (reward, no "
                             "exception), repeat: final-answer (drop trials that ended without a submitted answer, "
                             "e.g. at the turn limit), format-errors (drop trials with a malformed reply; by default "
                             "such turns are kept as untrained context).", json_schema_extra=flag("--audit",
                                                                                                    repeat=True))
    include_hstar: bool = Field(False, description="Data-source ablation: keep runs under h* (any student) as they "
                                "happened, bank prompt and tools included; their rows are labelled hstar.",
                                json_schema_extra=flag("--include-hstar"))
    canary: list[str] = Field(default_factory=list, description="A string that must never reach a row (repeat).",
                              json_schema_extra=flag("--canary", repeat=True))


class SuitesSettings(BaseModel):
    """`unscaffold suites`: the suites this installation finds (built in, and on UNSCAFFOLD_SUITE_PATH)."""

    search: Path | None = Field(None, description="Also look in this folder of suite folders, as a folder on "
                                "UNSCAFFOLD_SUITE_PATH is looked in (check your own suites before adding them).",
                                json_schema_extra=flag("--search"))
    as_json: AsJson = False


class ReportSettings(BaseModel):
    """`unscaffold report`: the HTML page of a run."""

    run_dir: Path = Field(description="A run folder.")
    out: Path | None = Field(None, description="HTML file to write (default RUN_DIR/report.html).",
                             json_schema_extra=flag("--out"))


class _ReportedRuns(BaseModel):
    """The eligibility rule, bank, taught list and outputs shared by the commands that compare runs."""

    min_eligible: MinEligible = 10
    rule: TrialRule = "any"
    bank: Bank = None
    taught: Taught = None
    as_json: AsJson = False
    out: HtmlPage = None


class BehaviorsSettings(_ReportedRuns):
    """`unscaffold behaviors`: behaviour recovery from one run of each role per suite."""

    base_h: list[Path] = Field(description="Run of the base model under h (one per suite; repeat).",
                               json_schema_extra=flag("--base-h", repeat=True))
    base_hstar: list[Path] = Field(description="Run of the base model under h* (one per suite; repeat).",
                                   json_schema_extra=flag("--base-hstar", repeat=True))
    tuned: list[Path] = Field(description="Run of the trained model under h (one per suite; repeat).",
                              json_schema_extra=flag("--tuned", repeat=True))


class CompareSettings(_ReportedRuns):
    """`unscaffold compare`: runs of one suite and split, side by side."""

    runs: list[Path] = Field(description="Run folders of one suite and split.")
    baseline: Path | None = Field(None, description="Run the others are paired with (default: the first).",
                                  json_schema_extra=flag("--baseline"))
    seed: int = Field(0, description="Seed of the bootstrap.", json_schema_extra=flag("--seed"))


class CascadeReportSettings(BaseModel):
    """`unscaffold cascade-report`: what a cascade reviewer would have saved."""

    runs: list[Path] = Field(description="Run folders collected with a reviewer on every step.")
    as_json: AsJson = False
    out: HtmlPage = None


class SplitSettings(BaseModel):
    """`unscaffold split`: a seeded split of a real data folder."""

    folder: Path = Field(description="The real data: a SpreadsheetBench folder, USPTO CSV(s), Harbor tasks or an "
                         "AppWorld root.")
    sizes: str = Field(description="How many tasks per split, e.g. train=300,test=100.",
                       json_schema_extra=flag("--sizes"))
    out: Path = Field(description="The split file (JSON) to write.", json_schema_extra=flag("--out"))
    seed: int = Field(0, description="Seed of the shuffle.", json_schema_extra=flag("--seed"))
    suite: str | None = Field(None, description="The suite reading FOLDER (default: guessed from its files).",
                              json_schema_extra=flag("--suite"))


class InspectSftSettings(BaseModel):
    """`unscaffold inspect-sft`: one row as the loss sees it."""

    data: Path = Field(description="DATA.jsonl: build-sft rows or TRL conversational rows.")
    model: Annotated[WeightsSpec, read_as(WeightsSpec, "--model")] = Field(
        description="Tokenizer and chat template: a path, a hub id, or tiny[:TEMPLATE].",
        json_schema_extra=flag("--model"))
    row: int = Field(0, description="Row index (0-based, blank lines skipped).", json_schema_extra=flag("--row"))
    as_json: bool = Field(False, description="Print the segments [{text, trained}] as JSON.",
                          json_schema_extra=flag("--json"))
    split_turns: bool = Field(False, description="Show one sample per assistant turn.",
                              json_schema_extra=flag("--split-turns"))


class MergeSettings(BaseModel):
    """`unscaffold merge`: an adapter folded into its base model."""

    adapter: Path = Field(description="A train-sft folder (PEFT adapter).")
    out: Path = Field(description="Folder for the merged weights and tokenizer.", json_schema_extra=flag("--out"))
    base: Annotated[WeightsSpec | None, read_as(WeightsSpec, "--base")] = Field(
        None, description="Base model (default: the one the adapter records).", json_schema_extra=flag("--base"))
