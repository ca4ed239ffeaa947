"""The unscaffold harness behind TRL's `environment_factory`: one environment class per harness.

Each rollout gets the task's workspace in a fresh sandbox (`reset`), the harness's tools as methods
(`execute`, plus a sibling bank's tools), its checks on every call, and the suite's own verifier as
`get_reward`. The trainer renders each environment's rows with its harness's own tool schemas
(`harness.tools()`, exactly what `unscaffold run --harness NAME` offers), so a rescue rollout is
generated, and later scored, in its own sibling's context, token for token as it would be deployed."""

from __future__ import annotations

import contextlib
import inspect
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from unscaffold.benchmarks.base import Suite, Task
from unscaffold.knowledge.bank import ToolSpec
from unscaffold.knowledge.hstar import HStarHarness
from unscaffold.llm.output_check import repaired_response, response_problem
from unscaffold.llm.types import AssistantResponse, Message, ToolCall
from unscaffold.minimal_harness.agent import AgentConfig
from unscaffold.minimal_harness.harness import Harness
from unscaffold.minimal_harness.sandbox import open_sandbox
from unscaffold.minimal_harness.sandbox.base import DEFAULT_COMMAND_TIMEOUT_S, SandboxKind
from unscaffold.minimal_harness.sandbox.disk import open_trial_disk
from unscaffold.minimal_harness.tool import EXECUTE_TOOL, format_problem
from unscaffold.minimal_harness.trajectory import Trajectory

JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "object": dict,
                              "array": list}


class EnvironmentContext(BaseModel):
    """What every rollout of one harness shares."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    suite: Suite
    tasks: dict[str, Task]
    harness_name: str
    harness: Any  # a Harness (a Protocol, which pydantic cannot check)
    sandbox: SandboxKind = "local"
    command_timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S
    max_format_errors: int = AgentConfig().max_format_errors  # h's: that many malformed replies in a row end it
    work_dir: Path


class HarnessEnvironment:
    """Base class; `environment_class` binds a harness to a subclass of it."""

    context: EnvironmentContext

    def __init__(self) -> None:
        self._sandbox: Any = None
        # The rollout's filesystem, then the suite's per-trial services (e.g. an app world's server) on top of it.
        self._services = contextlib.ExitStack()
        self._trial_dir: Path | None = None
        self._task: Task | None = None
        self._transcript: list[Message] = []
        self._format_errors = 0  # malformed replies in a row, as h's agent counts them
        self._ended: str | None = None

    def reset(self, **row: Any) -> None:
        """Open the task's workspace in a fresh sandbox; the row's `prompt` already holds the instruction."""
        self._close()
        ctx = self.context
        self._task = ctx.tasks[row["task_id"]]
        ctx.work_dir.mkdir(parents=True, exist_ok=True)
        self._trial_dir = Path(tempfile.mkdtemp(prefix="rollout-", dir=ctx.work_dir))
        config = ctx.suite.prepare(self._task, self._trial_dir, ctx.sandbox)
        config.timeout_s = ctx.command_timeout_s
        if isinstance(ctx.harness, HStarHarness):
            config.mounts.append(ctx.harness.mount())
        # The same bounded filesystem a `run` trial writes to (a write past its size fails inside the
        # sandbox), from before the services start; nothing of the rollout stays on the host.
        disk = open_trial_disk(config)
        if disk is not None:
            self._services.callback(disk.close)
        self._services.enter_context(ctx.suite.services(self._task, self._trial_dir))
        self._sandbox = open_sandbox(config)
        self._transcript, self._format_errors, self._ended = [], 0, None
        return None

    def execute(self, command: str):  # no return hint: no schema `return` key
        return self._call("execute", {"command": command})

    # The docstring is the harness's own EXECUTE_TOOL, so a schema built from it (transformers'
    # get_json_schema) is that tool's, key for key; the trainer renders the harness's schemas anyway.
    execute.__doc__ = (f"{EXECUTE_TOOL['function']['description']}\n\nArgs:\n    command: "
                       f"{EXECUTE_TOOL['function']['parameters']['properties']['command']['description']}\n")

    def get_reward(self) -> float:
        """The suite's verifier on the final workspace; the sandbox and workspace go away after it."""
        ctx = self.context
        assert self._task is not None and self._trial_dir is not None
        trajectory = Trajectory(trial_id=self._trial_dir.name, task_id=self._task.id, suite=ctx.suite.name,
                                student="policy", harness=ctx.harness_name, tools=ctx.harness.tools(),
                                messages=list(self._transcript))
        try:
            return float(ctx.suite.score(self._task, self._trial_dir, self._sandbox, trajectory).reward)
        finally:
            self._close()

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        """One tool call made directly (a reply of exactly this call)."""
        return self._reply_calls([{"type": "function", "function": {"name": name, "arguments": arguments}}])[0]

    def _reply_calls(self, calls: list[dict[str, Any]]) -> list[str]:
        """The observations of one reply's tool calls (TRL's `{"function": {"name", "arguments"}}` form), as
        h's agent answers a reply: a malformed one (several calls, an unknown tool, arguments that are not an
        object, an empty command) gets h's format error for every call and runs nothing; a well-formed one
        runs its call through the harness (its checks, its output cut, its observation). As in h, that many
        malformed replies in a row end the episode: later calls run nothing."""
        harness: Harness = self.context.harness
        if self._sandbox is None:
            return ["Error: the environment was not reset."] * len(calls)
        if self._ended:
            return [f"The episode has ended: {self._ended}."] * len(calls)
        parsed = []
        for j, call in enumerate(calls):
            function = call.get("function") or {}
            arguments = function.get("arguments")
            parsed.append(ToolCall(id=f"call_{len(self._transcript)}_{j}", name=str(function.get("name", "")),
                                   arguments={k: v for k, v in arguments.items() if v is not None}
                                   if isinstance(arguments, dict) else None))
        response = AssistantResponse(tool_calls=parsed)
        unkeepable = response_problem(response)  # a lone surrogate, arguments nested too deep: never run
        self._transcript.append((repaired_response(response) if unkeepable else response).to_message())
        problem = unkeepable or format_problem(response, harness.tool_names())
        if problem:
            self._format_errors += 1
            if self._format_errors >= self.context.max_format_errors:
                self._ended = f"{self._format_errors} malformed replies in a row"
            observations = [problem] * len(parsed)
        else:
            self._format_errors = 0
            observations = [harness.run_call(parsed[0], self._sandbox, self.context.command_timeout_s,
                                             self._transcript).observation(self.context.suite.output_cut_chars)]
        for done, observation in zip(parsed, observations, strict=True):
            self._transcript.append(Message(role="tool", tool_call_id=done.id, name=done.name, content=observation))
        return observations

    def _close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
        self._services.close()
        if self._trial_dir is not None:
            shutil.rmtree(self._trial_dir, ignore_errors=True)
            self._trial_dir = None


def tool_method(tool: ToolSpec) -> Any:
    """A bank tool as a method with a real signature and a Google docstring (what TRL turns into a schema)."""
    props: dict[str, Any] = tool.parameters.get("properties", {})
    required = set(tool.parameters.get("required", []))

    def method(self: HarnessEnvironment, **arguments: Any) -> str:
        return self._call(tool.name, arguments)

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    for name in sorted(props, key=lambda n: n not in required):
        kind = JSON_TYPES.get(props[name].get("type", "string"), str)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=kind,
                                        default=inspect.Parameter.empty if name in required else None))
        annotations[name] = kind
    args = "\n".join(f"    {n}: {(props[n].get('description') or n).replace(chr(10), ' ')}" for n in props)
    method.__name__ = method.__qualname__ = tool.name
    method.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    method.__doc__ = f"{tool.description}\n\nArgs:\n{args}\n" if props else tool.description
    return method


def environment_class(context: EnvironmentContext) -> type[HarnessEnvironment]:
    """A HarnessEnvironment subclass bound to one harness, with that harness's bank tools as methods."""
    members: dict[str, Any] = {"context": context}
    if isinstance(context.harness, HStarHarness):
        for tool in context.harness.bank.manifest.tools:
            members[tool.name] = tool_method(tool)
    name = "Env_" + re.sub(r"\W", "_", context.harness_name)
    return type(name, (HarnessEnvironment,), members)


class ReplyTools(dict):
    """One rollout's tools as TRL's tool loop looks them up, answering as h answers a reply.

    TRL runs each call of a reply on its own, an unknown name as "Tool X not found" and arguments that are
    not an object as a TypeError. Here every name is known; at the first lookup of a reply (the last message
    of the rollout's completion) the environment answers the whole reply at once (`_reply_calls`), and each call
    then gets its observation in order."""

    def __init__(self, environment: HarnessEnvironment, messages: list[dict[str, Any]]) -> None:
        super().__init__()
        self.environment, self.messages = environment, messages
        self._reply: dict[str, Any] | None = None
        self._answers: list[str] = []

    def __contains__(self, name: object) -> bool:
        reply = self.messages[-1] if self.messages else None
        if reply is not None and reply is not self._reply:
            self._reply = reply
            calls = reply.get("tool_calls") or []
            self._answers = self.environment._reply_calls(calls)
            for call in calls:  # TRL unpacks the arguments: an unparsed one must not raise before the lookup
                function = call.get("function") or {}
                if not isinstance(function.get("arguments"), dict):
                    function["arguments"] = {}
        return True

    def __getitem__(self, name: str) -> Any:
        answer = self._answers.pop(0) if self._answers else ""

        def answered(**_: Any) -> str:
            return answer

        answered.__name__ = name
        return answered

    def finish(self) -> None:
        """Run the calls of the rollout's last reply, which TRL leaves unrun at its iteration limit and h runs
        (its observation is never seen: the episode ends), so the workspace the verifier scores is h's."""
        reply = self.messages[-1] if self.messages else None
        if reply is not None and reply is not self._reply and reply.get("role") == "assistant" \
                and reply.get("tool_calls"):
            self.__contains__("")
