"""What a run writes to disk: its config, one result per trial, and the run summary."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic_core import InitErrorDetails

from unscaffold.errors import UnscaffoldError
from unscaffold.flags import Concurrency, DataFolder, SplitFile, TaskIds, Trials, flag
from unscaffold.llm.sampling import Sampling
from unscaffold.llm.types import Usage
from unscaffold.minimal_harness.agent import AgentConfig
from unscaffold.minimal_harness.sandbox.base import SandboxSettings
from unscaffold.outcomes import Outcome
from unscaffold.reviewer.hook import ReviewCounts
from unscaffold.specs import ExecutorSpec, HarnessSpec, ModelSpec, ReviewerSpec, read_as
from unscaffold.suites import suite_help

DEFAULT_REPLACE_BUDGET = 5  # REPLACE decisions a reviewer may make per trial


class RunConfig(BaseModel):
    """Everything `unscaffold run` is told: the one source of the run's settings. Each field is documented
    once, here; the command's options (`flag`) and their help are built from these fields, and
    `--config run.toml` accepts the same names (agent and sandbox settings in their own tables).
    `config.json` of a run is this model; its specs (student, reviewer, harness, executor) are JSON objects
    there, and a config.json of an earlier version that holds their text still reads."""

    suite: str = Field(description=suite_help())
    student: Annotated[ModelSpec, read_as(ModelSpec, "--student", oracle=True)] = Field(
        description="Model spec or `oracle`.", json_schema_extra=flag("--student"))
    out: Path = Field(description="Run folder (re-running resumes it).", json_schema_extra=flag("--out"))
    data: DataFolder = None
    split: str | None = Field(None, description="train or test.", json_schema_extra=flag("--split"))
    split_file: SplitFile = None
    task_ids: TaskIds = None
    trials: Trials = 1
    concurrency: Concurrency = 1
    harness: Annotated[HarnessSpec, read_as(HarnessSpec, "--harness")] = Field(
        HarnessSpec(kind="minimal"), description="minimal, hstar (the suite bank), a bank folder, or route:POOL "
        "(rank-1 routing: each task under the sibling --router ranks first; POOL a pool.toml, or `shipped` for the "
        "suite's own pool).", json_schema_extra=flag("--harness"))
    finish_checks: bool = Field(True, description="Run an h* bank's before_finish checks. --no-finish-checks "
                                "runs the bank as a rescue-training rollout meets it (TRL's tool loop ends at the "
                                "first reply without a tool call): validate a pool for training this way.",
                                json_schema_extra=flag("--finish-checks/--no-finish-checks"))
    opening: str | None = Field(None, description="How an episode starts: plain (the system prompt, then the task) "
                                "or demonstration (AppWorld's official first turn: a worked example, then the "
                                "task; the appworld suite's default). Default: the suite's.",
                                json_schema_extra=flag("--opening"))
    router: str | None = Field(None, description="With --harness route:POOL: random, rule or adaptive (default: "
                               "rule with --router-validation, else random).", json_schema_extra=flag("--router"))
    router_validation: Path | None = Field(None, description="With --harness route:POOL: the validation table the "
                                           "rule and adaptive routers read (`rescue validation` writes it).",
                                           json_schema_extra=flag("--router-validation"))
    reviewer: Annotated[ReviewerSpec | None, read_as(ReviewerSpec, "--reviewer")] = Field(
        None, description="Reviewer: a model spec, replay:FILE, rules, cascade:SPEC, passthrough. With one, the run "
        "is a collection.", json_schema_extra=flag("--reviewer"))
    knowledge: Path | None = Field(None, description="K for the reviewer (default: the suite's).",
                                   json_schema_extra=flag("--knowledge"))
    budget: int = Field(DEFAULT_REPLACE_BUDGET, ge=0, description="REPLACE decisions allowed per trial.",
                        json_schema_extra=flag("--budget"))
    reviewer_reads_gold: bool = Field(False, description="Ablation: the reviewer also reads the task's reference "
                                      "solution (the gold answer), which the recipe's reviewer never sees. Rows "
                                      "built from the run are labelled gold_reviewer.",
                                      json_schema_extra=flag("--reviewer-reads-gold"))
    empty_k: bool = Field(False, description="Ablation: the reviewer works without K (its generic rules only). Rows "
                          "built from the run are labelled empty_k.", json_schema_extra=flag("--empty-k"))
    reviewer_concurrency: int | None = Field(None, ge=1, description="Reviewer calls in flight at once.",
                                             json_schema_extra=flag("--reviewer-concurrency"))
    infra_retries: int = Field(2, ge=0, description="Re-runs of a trial whose machinery failed.",
                               json_schema_extra=flag("--infra-retries"))
    executor: Annotated[ExecutorSpec, read_as(ExecutorSpec, "--executor")] = Field(
        ExecutorSpec(kind="local"), description="Where trials run: local (threads), ray (a local Ray instance) or "
        "ray:ADDRESS (a cluster; `auto` or ray://host:10001), optionally ?cpus=N&memory=SIZE.",
        json_schema_extra=flag("--executor"))
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    sampling: Sampling = Field(default_factory=Sampling)

    @model_validator(mode="before")
    @classmethod
    def _nest_flat_settings(cls, data: Any) -> Any:
        """config.json of earlier versions (and callers) name the agent and sandbox settings flat."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if isinstance(data.get("sandbox"), str):
            data["sandbox"] = {"kind": data["sandbox"]}
        for section, model in (("agent", AgentConfig), ("sandbox", SandboxSettings)):
            flat = {k: data.pop(k) for k in list(data) if k in model.model_fields and k not in cls.model_fields}
            if flat:
                nested = data.get(section)
                nested = nested.model_dump() if isinstance(nested, BaseModel) else dict(nested or {})
                data[section] = {**flat, **nested}
        return data

    IDENTITY: ClassVar[tuple[str, ...]] = ("suite", "student", "data", "split", "split_file", "task_ids", "trials",
                                           "harness", "opening", "finish_checks", "reviewer", "knowledge", "budget",
                                           "reviewer_reads_gold", "empty_k", "sampling")

    def identity(self) -> dict[str, Any]:
        """The fields that make two invocations the same run (resume only continues the same run); flat, as
        config.json of every version can give them."""
        return {**self.model_dump(mode="json", include=set(self.IDENTITY)), "max_turns": self.agent.max_turns}

    @classmethod
    def identity_of(cls, raw: dict[str, Any]) -> dict[str, Any]:
        """The identity of a config.json as written (by this version or an earlier, flat one)."""
        try:
            return cls.model_validate(raw).identity()
        except (ValidationError, UnscaffoldError):  # unreadable: compare what is there
            return {k: raw.get(k) for k in (*cls.IDENTITY, "max_turns")}


# ReviewCounts' field names -> the keys result.json gives them
_REVIEW_KEYS = {name: f.alias or name for name, f in ReviewCounts.model_fields.items()}
_REVIEW_FILE_KEYS = frozenset(_REVIEW_KEYS.values())


class TrialResult(BaseModel):
    trial_id: str
    task_id: str
    scenario: str | None = None
    reward: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    outcome: Outcome = Outcome.FAILED
    reason: str = Field("", description="why it scored what it did; empty only when passed")
    environment_notes: list[str] = Field(default_factory=list, description="what the sandbox did not apply of "
                                         "the task's environment (e.g. Dockerfile lines under `local`), also when "
                                         "the trial passed")
    details: dict[str, Any] = Field(default_factory=dict)
    exit_status: str
    exception: str | None = None
    infra_error: bool = False
    attempt: int = 1
    turns: int = 0
    format_errors: int = 0
    replacements: int = 0
    review: ReviewCounts = Field(default_factory=ReviewCounts, description="flat in result.json, under its aliases")
    student_usage: Usage = Field(default_factory=Usage)
    isolation: str = ""
    wall_s: float = 0.0
    started_at: str
    ended_at: str

    @model_validator(mode="wrap")
    @classmethod
    def _gather_review(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """result.json keeps the review counts flat, beside the trial's own fields; a bad one is named as
        the file names it (`reviewer_calls`, not `review.reviewer_calls`)."""
        if not isinstance(data, dict) or "review" in data:
            return handler(data)
        try:
            return handler({**{k: v for k, v in data.items() if k not in _REVIEW_FILE_KEYS},
                            "review": {k: v for k, v in data.items() if k in _REVIEW_FILE_KEYS}})
        except ValidationError as e:
            errors: list[InitErrorDetails] = []
            for err in e.errors():
                detail = InitErrorDetails(type=err["type"], input=err["input"],
                                          loc=err["loc"][1:] if err["loc"][:1] == ("review",) else err["loc"])
                if "ctx" in err:
                    detail["ctx"] = err["ctx"]
                errors.append(detail)
            raise ValidationError.from_exception_data(e.title, errors) from None

    @model_serializer(mode="wrap")
    def _flatten_review(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in handler(self).items():
            if key == "review":  # its keys are field names, or already the aliases when dumped by alias
                out.update({_REVIEW_KEYS.get(k, k): v for k, v in value.items()})
            else:
                out[key] = value
        return out


class RunResults(BaseModel):
    """`results.json`. Suite metrics (e.g. `tgc`, `sgc`) sit at the top level beside `pass_at_1`."""

    model_config = ConfigDict(extra="allow")
    suite: str
    student: str
    harness: str
    split: str | None
    n_tasks: int
    n_trials: int
    pass_at_1: float
    mean_reward: float
    per_task: dict[str, float]
    reviewer: str | None = None
    knowledge: str | None = None
    budget: int | None = None
    reviewer_calls: int = 0
    reviewer_calls_saved: int = 0
    invalid_submissions: int = 0
    replacements: int = 0
    replacements_per_trial: dict[str, int] = Field(default_factory=dict)
    tokens: dict[str, dict[str, int]] = Field(default_factory=dict)
    cost_usd: float = 0.0
    wall_time_s: float = 0.0
    trial_wall_s: float = 0.0
    exit_status: dict[str, int] = Field(default_factory=dict)
    exceptions: int = 0
    infra_errors: int = Field(0, description="trials whose outcome is infra_error (outcomes[\"infra_error\"])")
    infra_retried: int = 0
    isolation: str = Field("", description="the trials' isolation, or `mixed: see isolations`")
    isolations: dict[str, int] = Field(default_factory=dict, description="trials per isolation")
    outcomes: dict[str, int] = Field(default_factory=dict, description="trials per outcome")
    infra_cause: str | None = Field(None, description="the first infrastructure failure's reason, if any")
    skipped_tasks: dict[str, str] = Field(default_factory=dict, description="tasks of the data that could not "
                                          "be read: id -> why")
    unscaffold_version: str
