"""An LLM reviewer: reads the visible transcript, the proposal, the hints and K, answers with `submit_review`.

A small K is shown inline (one call usually suffices); a large one is read through ls/read/grep confined
to K. An invalid submission goes back as the tool result of that `submit_review` call, so the model
sees its own answer and the error side by side."""

from __future__ import annotations

from importlib import resources
from typing import Any

from unscaffold.knowledge.kfolder import K
from unscaffold.llm.base import Model
from unscaffold.llm.output_check import repaired_response, response_problem
from unscaffold.llm.registry import load_provider
from unscaffold.llm.types import AssistantResponse, Message, Usage
from unscaffold.reviewer.base import RawSubmission, ReviewRequest, ReviewSession
from unscaffold.reviewer.ktools import SCHEMAS as K_TOOL_SCHEMAS
from unscaffold.reviewer.ktools import KTools
from unscaffold.reviewer.render import render_request
from unscaffold.reviewer.submission import REASON_MAX
from unscaffold.specs.model import ModelSpec

SUBMIT = "submit_review"
INLINE_LIMIT = 24_000
MAX_K_TOOLS = 8

SUBMIT_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": SUBMIT,
        "description": "Submit the review of the pending proposal: PASS keeps it, REPLACE substitutes a complete "
        "student response that may only call `execute`.",
        "parameters": {
            "type": "object",
            "properties": {
                "decision": {"type": "string", "enum": ["PASS", "REPLACE"]},
                "replacement": {
                    "type": "object",
                    "description": "REPLACE only: the student's next response, first person.",
                    "properties": {
                        "reasoning": {"type": "string"},
                        "content": {"type": "string", "description": "visible text (the final answer if no call)"},
                        "tool_call": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string", "enum": ["execute"]},
                                "arguments": {
                                    "type": "object",
                                    "properties": {"command": {"type": "string", "minLength": 1}},
                                    "required": ["command"],
                                    "additionalProperties": False,
                                },
                            },
                            "required": ["name", "arguments"],
                            "additionalProperties": False,
                        },
                    },
                    "additionalProperties": False,
                },
                "components_used": {"type": "array", "items": {"type": "string"}},
                "reason": {"type": "string", "minLength": 1, "maxLength": REASON_MAX},
            },
            "required": ["decision", "reason"],
            "additionalProperties": False,
        },
    },
}

PROTOCOL = f"""## How to answer
Call `{SUBMIT}` once with:
- `decision`: "PASS" keeps the proposal; "REPLACE" substitutes your `replacement`.
- `replacement` (REPLACE only, omit it for PASS): `{{"reasoning"?, "content"?, "tool_call"?: {{"name": "execute", \
"arguments": {{"command": "..."}}}}}}` with visible content or one `execute` call with a non-empty command; a \
replacement without a tool call is a final answer.
- `components_used`: the ids of the reference components your decision rests on (may be empty).
- `reason`: 1-{REASON_MAX} characters, why. Only the replacement reaches the student; the reason stays private.
If the submission is invalid you get the error back; correct it and call `{SUBMIT}` again."""


def default_prompt() -> str:
    """The reviewer rules used when there is no K (a suite without one)."""
    return resources.files("unscaffold.reviewer").joinpath("default_prompt.md").read_text("utf-8").strip()


def inline_k(k: K) -> str:
    files = []
    for path in k.files():
        rel = path.relative_to(k.root).as_posix()
        if rel == k.index.reviewer_prompt:
            continue
        files.append(f"=== {rel} ===\n{path.read_text(encoding='utf-8', errors='replace').strip()}")
    return "## Reference K (private; the student never sees it)\n\n" + "\n\n".join(files)


def k_index(k: K) -> str:
    rows = [f"- {c.id}: {c.path} - {c.summary}" for c in k.index.components]
    return (
        "## Reference K (private; the student never sees it)\n"
        f"K is too large to show here. Look things up with `ls`, `read` and `grep` (paths relative to K; at most "
        f"{MAX_K_TOOLS} look-ups per review), then call `{SUBMIT}`. Components:\n" + "\n".join(rows)
    )


def system_text(k: K | None, use_tools: bool) -> str:
    parts = [k.reviewer_prompt.strip() if k is not None else default_prompt()]
    if k is not None:
        parts.append(k_index(k) if use_tools else inline_k(k))
    parts.append(PROTOCOL)
    return "\n\n".join(parts)


class LLMSession(ReviewSession):
    def __init__(self, model: Model, request: ReviewRequest, inline_limit: int, max_k_tools: int) -> None:
        self.model, self.max_k_tools = model, max_k_tools
        k = request.k
        self.k_tools = KTools(k) if k is not None and k.text_size() > inline_limit else None
        self.tools: list[dict[str, Any]] = [SUBMIT_TOOL, *(K_TOOL_SCHEMAS if self.k_tools else [])]
        prompt, self.context_cut = render_request(request)
        self.messages = [
            Message(role="system", content=system_text(k, self.k_tools is not None)),
            Message(role="user", content=prompt),
        ]
        self.k_calls = 0
        self.pending_call_id: str | None = None  # the submit_review call whose answer is still owed

    def next(self, error: str | None) -> RawSubmission | None:
        if error is not None:
            feedback = f"Invalid submission: {error}. Correct it and call `{SUBMIT}` again."
            if self.pending_call_id is not None:
                self.messages.append(Message(role="tool", tool_call_id=self.pending_call_id, name=SUBMIT,
                                             content=feedback))
            else:
                self.messages.append(Message(role="user", content=feedback))
        self.pending_call_id = None
        calls, usage = 0, Usage()
        response = AssistantResponse()
        for _ in range(self.max_k_tools + 2):  # every round but the last spends at least one look-up
            response = self.model.complete(self.messages, self.tools)
            calls, usage = calls + 1, usage + response.usage
            kept = repaired_response(response) if response_problem(response) else response  # sent back to it
            self.messages.append(kept.to_message())
            submit = next((c for c in response.tool_calls if c.name == SUBMIT), None)
            for call in response.tool_calls:
                if call is not submit:
                    self.messages.append(Message(role="tool", tool_call_id=call.id, name=call.name,
                                                 content=self._look_up(call.name, call.arguments)))
            if submit is not None:
                self.pending_call_id = submit.id
                payload = submit.arguments if submit.arguments is not None else (submit.raw_arguments or "")
                return RawSubmission(payload=payload, usage=usage, calls=calls)
            if not response.tool_calls:  # a plain-text reply is taken as the submission text
                return RawSubmission(payload=response.content or "", usage=usage, calls=calls)
        return RawSubmission(payload=response.content or "", usage=usage, calls=calls)

    def _look_up(self, name: str, arguments: dict[str, Any] | None) -> str:
        if self.k_tools is None:
            return f"error: unknown tool `{name}`; call `{SUBMIT}`"
        if self.k_calls >= self.max_k_tools:
            self.tools = [SUBMIT_TOOL]
            return f"error: the limit of {self.max_k_tools} look-ups is spent; call `{SUBMIT}` now"
        self.k_calls += 1
        return self.k_tools.call(name, arguments)


class LLMReviewer:
    """One trial's LLM reviewer. `model` is a Model or a model spec (openai:, anthropic:, hf:)."""

    def __init__(
        self,
        model: Model | str,
        *,
        task_id: str = "*",
        inline_limit: int = INLINE_LIMIT,
        max_k_tools: int = MAX_K_TOOLS,
    ) -> None:
        if isinstance(model, str):
            model = load_provider(model, flag="--reviewer").for_trial(task_id)
        self.model, self.name = model, model.spec
        self.inline_limit, self.max_k_tools = inline_limit, max_k_tools

    def open(self, request: ReviewRequest) -> ReviewSession:
        return LLMSession(self.model, request, self.inline_limit, self.max_k_tools)


class LLMReviewerFactory:
    """Per-trial LLM reviewers over one model provider (stateless backends share one model)."""

    def __init__(self, spec: ModelSpec | str, **options: Any) -> None:
        self.spec, self.options = str(spec), options
        self.provider = load_provider(spec, flag="--reviewer")

    def for_trial(self, task_id: str) -> LLMReviewer:
        return LLMReviewer(self.provider.for_trial(task_id), **self.options)
