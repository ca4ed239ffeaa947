"""What an LLM reviewer reads: the visible transcript, the pending proposal and the middleware hints.

Long parts are cut head-and-tail (errors usually sit at the end of an output, context at the start);
when the whole transcript is still too long, the oldest turns go first, never the task."""

from __future__ import annotations

from unscaffold.knowledge.middleware import Hint
from unscaffold.llm.types import AssistantResponse, Message
from unscaffold.reviewer.base import ReviewRequest

TASK_CHARS = 12_000
SYSTEM_CHARS = 2_000
REASONING_CHARS = 2_000
TEXT_CHARS = 3_000
COMMAND_CHARS = 4_000
RESULT_CHARS = 3_000
TRANSCRIPT_CHARS = 60_000


def clip(text: str, limit: int) -> str:
    """Keep the head and the tail, with a note of how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def _assistant(reasoning: str | None, content: str | None, commands: list[str]) -> list[str]:
    out = []
    if reasoning:
        out.append(f"Reasoning:\n{clip(reasoning, REASONING_CHARS)}")
    if content:
        out.append(f"Text:\n{clip(content, TEXT_CHARS)}")
    for command in commands:
        out.append(f"Command (execute):\n```bash\n{clip(command, COMMAND_CHARS)}\n```")
    return out


def _message_commands(message: Message) -> list[str]:
    out = []
    for call in message.tool_calls or []:
        args = call.function.arguments
        if isinstance(args, dict) and isinstance(args.get("command"), str) and call.function.name == "execute":
            out.append(args["command"])
        else:
            out.append(f"(malformed call to `{call.function.name}` with arguments {str(args)[:500]!r})")
    return out


def render_transcript(transcript: list[Message]) -> str:
    head: list[str] = []
    turns: list[str] = []
    turn, task_seen = 0, False
    for m in transcript:
        if m.role == "system":
            head.append(f"## Student system prompt\n{clip(m.content, SYSTEM_CHARS)}")
        elif m.role == "user" and not task_seen:
            task_seen = True
            head.append(f"## Task\n{clip(m.content.strip(), TASK_CHARS)}")
        elif m.role == "user":
            turns.append(f"## User\n{clip(m.content, TEXT_CHARS)}")
        elif m.role == "assistant":
            turn += 1
            body = _assistant(m.reasoning_content, m.content, _message_commands(m)) or ["(empty reply)"]
            turns.append(f"## Turn {turn}: student\n" + "\n".join(body))
        else:
            turns.append(f"## Turn {turn}: result\n{clip(m.content, RESULT_CHARS)}")
    budget = TRANSCRIPT_CHARS - sum(len(h) for h in head)
    kept: list[str] = []
    for block in reversed(turns):
        if budget - len(block) < 0 and kept:
            break
        kept.append(block)
        budget -= len(block)
    kept.reverse()
    if len(kept) < len(turns):
        kept.insert(0, f"[... {len(turns) - len(kept)} earlier blocks omitted ...]")
    return "\n\n".join(head + kept)


def render_proposal(proposal: AssistantResponse, turn: int) -> str:
    commands = [
        c.arguments["command"] if c.name == "execute" and c.arguments and isinstance(c.arguments.get("command"), str)
        else f"(malformed call to `{c.name}` with arguments {(c.arguments or c.raw_arguments)!r})"
        for c in proposal.tool_calls
    ]
    body = _assistant(proposal.reasoning, proposal.content, commands)
    if not proposal.tool_calls:
        body.append("(no tool call: this reply ends the episode; its text is the final answer)")
    return f"# Pending proposal (turn {turn}, not yet run)\n" + "\n".join(body or ["(empty reply)"])


def render_hints(hints: list[Hint]) -> str:
    if not hints:
        return "# Middleware hints\n(none fired)"
    lines = [f"- {h.component_id} / {h.evidence} / {h.instruction}" for h in hints]
    return "# Middleware hints (component_id / evidence / instruction)\n" + "\n".join(lines)


def render_request(request: ReviewRequest) -> str:
    return "\n\n".join([
        "# Visible transcript\n" + render_transcript(request.transcript),
        render_proposal(request.proposal, request.turn),
        render_hints(request.hints),
        "Review the pending proposal now and answer with `submit_review`.",
    ])
