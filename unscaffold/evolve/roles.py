"""The analyst and the editor: any model spec (or `replay:FILE`) answers one prompt with a submission
through a `submit` tool; an invalid submission goes back with its error, up to three tries.

Replay files key their entries by step (`r1.analyst`, `r1.editor`, `r2.base.editor.1`, or `"*"`), and each
entry is the raw submission an LLM would make, so a resumed run replays the same step the same way."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from unscaffold.errors import ModelError
from unscaffold.evolve.budget import LLM_LOG, Budget, check_budget
from unscaffold.iojson import append_jsonl, read_json, write_json_atomic
from unscaffold.llm.registry import load_provider
from unscaffold.llm.replay import ReplayCursor, ReplayFile
from unscaffold.llm.types import Message, Usage
from unscaffold.minimal_harness.trajectory import now_iso
from unscaffold.reviewer.submission import InvalidSubmission
from unscaffold.specs.model import ModelSpec

MAX_TRIES = 3
T = TypeVar("T")


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema without `$defs`/`$ref`, which not every tool-calling API resolves."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {k: walk(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


def submit_tool(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": inline_refs(schema)}}


class Role:
    """One role (analyst or editor) played by one model spec; every exchange goes to DIR/llm.jsonl and
    DIR/exchanges/<key>.json."""

    def __init__(self, role: str, spec: ModelSpec | str, tool: dict[str, Any], out: Path, budget: Budget,
                 progress: Callable[[str], None] = lambda _: None) -> None:
        parsed = spec if isinstance(spec, ModelSpec) else ModelSpec.parse(spec, flag=f"--{role}")
        self.role, self.spec, self.tool, self.out, self.budget = role, str(parsed), tool, out, budget
        self.progress = progress
        self.replay = ReplayFile(Path(parsed.target)) if parsed.kind == "replay" else None
        self.provider = None if self.replay else load_provider(parsed, flag=f"--{role}")

    def ask(self, key: str, system: str, user: str, check: Callable[[Any], T]) -> tuple[T | None, list[str]]:
        """The first submission `check` accepts, or None with every rejection reason (in order)."""
        done = self.out / "exchanges" / f"{key}.json"
        if done.exists():  # a finished step of an interrupted run: judged again, never asked again
            return self._recorded(read_json(done), check)
        tool_name = self.tool["function"]["name"]
        messages = [Message(role="system", content=system), Message(role="user", content=user)]
        cursor = ReplayCursor(self.replay, key) if self.replay else None
        model = self.provider.for_trial(key) if self.provider else None
        errors: list[str] = []
        record: list[dict[str, Any]] = []
        for attempt in range(1, MAX_TRIES + 1):
            check_budget(self.out, self.budget)
            self.progress(f"{self.role} at step {key}, try {attempt}")
            usage, pending = Usage(), None
            try:
                if cursor is not None:
                    payload: Any = cursor.next_entry()
                else:
                    assert model is not None
                    response = model.complete(messages, [self.tool])
                    usage = response.usage
                    messages.append(response.to_message())
                    call = next((c for c in response.tool_calls if c.name == tool_name), None)
                    pending = call.id if call else None
                    payload = (call.arguments if call.arguments is not None else call.raw_arguments or "") \
                        if call else (response.content or "")
            except ModelError as e:  # the model failed, not the submission: stop; a resume asks again
                append_jsonl(self.out / LLM_LOG, {"key": key, "role": self.role, "spec": self.spec,
                                                  "attempt": attempt, "error": str(e), "at": now_iso()})
                raise ModelError(f"the {self.role} ({self.spec}) failed at step {key}: {e}") from None
            entry = {"key": key, "role": self.role, "spec": self.spec, "attempt": attempt,
                     "usage": usage.model_dump(), "at": now_iso()}
            try:
                value = check(payload)
            except InvalidSubmission as e:
                errors.append(str(e))
                append_jsonl(self.out / LLM_LOG, {**entry, "error": str(e)})
                record.append({"attempt": attempt, "submission": payload, "error": str(e)})
                feedback = f"Invalid submission: {e}. Correct it and call `{tool_name}` again."
                messages.append(Message(role="tool", tool_call_id=pending, name=tool_name, content=feedback)
                                if pending else Message(role="user", content=feedback))
                continue
            append_jsonl(self.out / LLM_LOG, {**entry, "accepted": True})
            record.append({"attempt": attempt, "submission": payload, "accepted": True})
            self._save(key, system, user, record)
            return value, errors
        self._save(key, system, user, record)
        return None, errors

    @staticmethod
    def _recorded(saved: dict[str, Any], check: Callable[[Any], T]) -> tuple[T | None, list[str]]:
        errors = [s["error"] for s in saved.get("submissions", []) if "error" in s]
        accepted = [s for s in saved.get("submissions", []) if s.get("accepted")]
        if not accepted:
            return None, errors
        try:
            return check(accepted[-1]["submission"]), errors
        except InvalidSubmission as e:
            return None, [*errors, str(e)]

    def _save(self, key: str, system: str, user: str, record: list[dict[str, Any]]) -> None:
        write_json_atomic(self.out / "exchanges" / f"{key}.json",
                          {"role": self.role, "spec": self.spec, "system": system, "prompt": user,
                           "submissions": record})
