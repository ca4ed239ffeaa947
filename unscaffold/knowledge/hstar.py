"""Running a student under h*: the bank's tools beside `execute`, its checks enforced, skills and memory
in the prompt. This is the "model + h*" baseline, and the harness the compiler turns into K."""

from __future__ import annotations

import json
import shlex
from importlib import resources
from pathlib import Path
from typing import Any

from unscaffold.knowledge.bank import Bank, CheckSpec, ToolSpec
from unscaffold.llm.types import AssistantResponse, Message, ToolCall
from unscaffold.minimal_harness.sandbox.base import DEFAULT_COMMAND_TIMEOUT_S, Mount, Sandbox
from unscaffold.minimal_harness.sandbox.result import ExecResult
from unscaffold.minimal_harness.tool import EXECUTE_TOOL, TOOL_NAME
from unscaffold.specs.harness import HarnessSpec

MOUNT_POINT = "/hstar"
NOT_RUN_EXIT_CODE = 126  # a check stopped the command before it ran


def script_command(script: str, payload: dict[str, Any], root: str = MOUNT_POINT) -> str:
    """How a bank script is invoked: by interpreter from its suffix, with one JSON argument."""
    interpreter = "python3" if script.endswith(".py") else "bash"
    return f"{interpreter} {shlex.quote(f'{root}/{script}')} {shlex.quote(json.dumps(payload, sort_keys=True))}"


def tool_schema(tool: ToolSpec) -> dict[str, Any]:
    return {"type": "function", "function": {"name": tool.name, "description": tool.description,
                                             "parameters": tool.parameters}}


def argument_problem(tool: ToolSpec, arguments: dict[str, Any]) -> str | None:
    props = tool.parameters.get("properties", {})
    missing = [k for k in tool.parameters.get("required", []) if k not in arguments]
    if missing:
        return f"Format error: `{tool.name}` needs {', '.join(f'`{m}`' for m in missing)}."
    unknown = [k for k in arguments if props and k not in props]
    if unknown:
        return f"Format error: `{tool.name}` takes no {', '.join(f'`{u}`' for u in unknown)}."
    return None


class HStarHarness:
    name = "hstar"

    def __init__(self, bank: Bank, finish_checks: bool = True) -> None:
        """`finish_checks=False` runs the bank as a rescue-training rollout meets it: TRL's tool loop ends
        at the first reply without a tool call, so `before_finish` checks never get to send it back."""
        self.bank = bank
        self.finish_checks = finish_checks
        self._tools = {t.name: t for t in bank.manifest.tools}

    def mount(self) -> Mount:
        return Mount(source=self.bank.root, target=MOUNT_POINT)

    def tools(self) -> list[dict[str, Any]]:
        return [EXECUTE_TOOL] + [tool_schema(t) for t in self.bank.manifest.tools]

    def tool_names(self) -> tuple[str, ...]:
        return (TOOL_NAME, *self._tools)

    def system_prompt(self) -> str:
        template = resources.files("unscaffold.knowledge").joinpath("hstar_prompt.md").read_text("utf-8")
        lines = "\n".join(f"- `{t.name}`: {t.description}" for t in self.bank.manifest.tools)
        parts = [template.replace("{tool_lines}", lines).strip()]
        for skill in self.bank.manifest.skills:
            parts.append(f"## Skill: {skill.name}\n\n{self.bank.path(skill.path).read_text(encoding='utf-8').strip()}")
        if self.bank.memory_rules:
            rules = "\n\n".join(
                f"### {r.name}\n- Trigger: {r.trigger}\n- Evidence: {r.evidence}\n- Intervention: {r.intervention}"
                f"\n- Do not trigger: {r.do_not_trigger}"
                for r in self.bank.memory_rules
            )
            parts.append(f"## Lessons from earlier tasks\n\n{rules}")
        return "\n\n".join(parts)

    def _checks(self, hook: str) -> list[CheckSpec]:
        return [c for c in self.bank.manifest.checks if c.hook == hook]

    def _run_checks(self, hook: str, sandbox: Sandbox, context: dict[str, Any]) -> list[str]:
        """Each check runs in the sandbox; exit 1 blocks with its output as the message."""
        messages = []
        for check in self._checks(hook):
            command = script_command(check.script, {"hook": hook, **context})
            result = sandbox.execute(command, timeout_s=DEFAULT_COMMAND_TIMEOUT_S)
            if result.exit_code == 1:
                messages.append(f"[check {check.name}] {result.output.strip() or check.description}")
        return messages

    def run_call(self, call: ToolCall, sandbox: Sandbox, timeout_s: float, transcript: list[Message]) -> ExecResult:
        assert call.arguments is not None
        turn = sum(1 for m in transcript if m.role == "assistant")
        if call.name == TOOL_NAME:
            command = call.arguments["command"]
            blocked = self._run_checks("before_command", sandbox, {"command": command, "turn": turn})
            if blocked:
                return ExecResult(output="\n".join(blocked) + "\n[the command was not run]",
                                  exit_code=NOT_RUN_EXIT_CODE)
            result = sandbox.execute(command, timeout_s=timeout_s)
            notes = self._run_checks("after_command", sandbox, {"command": command, "output": result.output,
                                                                 "exit_code": result.exit_code, "turn": turn})
            if notes:
                result.output = result.output + ("\n" if result.output else "") + "\n".join(notes)
            return result
        tool = self._tools[call.name]
        problem = argument_problem(tool, call.arguments)
        if problem:
            return ExecResult(output=problem, exit_code=2)
        return sandbox.execute(script_command(tool.script, call.arguments), timeout_s=timeout_s)

    def before_finish(self, response: AssistantResponse, sandbox: Sandbox, transcript: list[Message]) -> str | None:
        if not self.finish_checks:
            return None
        turn = sum(1 for m in transcript if m.role == "assistant")
        blocked = self._run_checks("before_finish", sandbox, {"final_answer": response.content or "", "turn": turn})
        return "\n".join(blocked) + "\nContinue working; finish again when this is resolved." if blocked else None


def bank_for_harness(spec: HarnessSpec | str, suite_bank: Path | None) -> Path:
    """`--harness hstar` means the suite's own bank; a bank harness names its folder (a pool's `base` and a
    results.json give the text)."""
    from unscaffold.errors import InputError

    spec = spec if isinstance(spec, HarnessSpec) else HarnessSpec.parse(spec)
    if spec.kind == "hstar":
        if suite_bank is None:
            raise InputError("--harness", None, "this suite ships no h* bank; pass --harness PATH to a bank folder")
        return suite_bank
    if spec.kind != "bank" or spec.path is None:
        raise InputError("--harness", None, f"{spec} runs no h* bank")
    return Path(spec.path)
