"""What an LLM reviewer reads: the visible transcript, the pending proposal and the middleware hints.

The reviewer sees each part exactly as the student saw it (the suite's output cut is already in the
observation; nothing is cut again). Only when the whole transcript is over the reviewer's context budget do
the oldest turns go (never the system prompt or the task), and the newest block is cut head-and-tail when it
alone is over; either cut is stated in the prompt and counted (`ContextCut`, logged in reviews.jsonl)."""

from __future__ import annotations

from unscaffold.knowledge.middleware import Hint
from unscaffold.llm.types import AssistantResponse, Message
from unscaffold.minimal_harness.sandbox.output import cut_output
from unscaffold.reviewer.base import ContextCut, ReviewRequest

# Characters of transcript the reviewer reads (about 60k tokens): room for K and the proposal in a 128k
# context. Past it the oldest turns are left out, with a note.
TRANSCRIPT_CHARS = 240_000
NEWEST_MIN_CHARS = 4_000  # the newest block keeps at least this much, however long the task


def _assistant(reasoning: str | None, content: str | None, commands: list[str]) -> list[str]:
    out = []
    if reasoning:
        out.append(f"Reasoning:\n{reasoning}")
    if content:
        out.append(f"Text:\n{content}")
    for command in commands:
        out.append(f"Command (execute):\n```bash\n{command}\n```")
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


def omission_note(cut: ContextCut) -> str:
    """The line that tells the reviewer turns are missing, so it never takes their absence as evidence."""
    return (f"[Context budget: the {cut.omitted_blocks} oldest blocks ({cut.omitted_turns} student turns, "
            f"{cut.omitted_chars:,} characters) are not shown here. The student saw them; do not assume anything "
            f"about them beyond what the turns shown support.]")


def fit_transcript(transcript: list[Message], budget: int = TRANSCRIPT_CHARS) -> tuple[str, ContextCut]:
    """The transcript as the reviewer reads it, and what the budget made it leave out."""
    head: list[str] = []
    turns: list[tuple[str, bool]] = []  # (block, is a student turn)
    turn, task_seen = 0, False
    for m in transcript:
        if m.role == "system":
            head.append(f"## Student system prompt\n{m.content}")
        elif m.role == "user" and not task_seen:
            task_seen = True
            head.append(f"## Task\n{m.content.strip()}")
        elif m.role == "user":
            turns.append((f"## User\n{m.content}", False))
        elif m.role == "assistant":
            turn += 1
            body = _assistant(m.reasoning_content, m.content, _message_commands(m)) or ["(empty reply)"]
            turns.append((f"## Turn {turn}: student\n" + "\n".join(body), True))
        else:
            turns.append((f"## Turn {turn}: result\n{m.content}", False))
    room = budget - sum(len(h) for h in head)
    cut = ContextCut()
    kept: list[str] = []
    for block, _ in reversed(turns):
        if not kept and len(block) > room:  # the newest block alone is over: its head and tail, marked
            limit = max(room, NEWEST_MIN_CHARS)
            kept.append(cut_output(block, limit))
            cut.cut_chars, room = max(len(block) - limit, 0), 0
            continue
        if len(block) > room:
            break
        kept.append(block)
        room -= len(block)
    left_out = turns[: len(turns) - len(kept)]
    cut.omitted_blocks = len(left_out)
    cut.omitted_turns = sum(1 for _, student in left_out if student)
    cut.omitted_chars = sum(len(block) for block, _ in left_out)
    kept.reverse()
    if cut.omitted_blocks:
        kept.insert(0, omission_note(cut))
    return "\n\n".join(head + kept), cut


def render_transcript(transcript: list[Message]) -> str:
    return fit_transcript(transcript)[0]


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


def render_gold(gold: str) -> str:
    """The gold-reading reviewer of the data-source ablation: the reference solution, which the recipe's
    reviewer never sees (its replacement must still rest on what the student can see)."""
    return "# Reference solution of this task (gold answer)\n```bash\n" + gold + "\n```"


def render_request(request: ReviewRequest) -> tuple[str, ContextCut]:
    """The reviewer's user message, and what the context budget left out of it."""
    transcript, cut = fit_transcript(request.transcript)
    return "\n\n".join([
        "# Visible transcript\n" + transcript,
        render_proposal(request.proposal, request.turn),
        render_hints(request.hints),
        *([render_gold(request.gold)] if request.gold is not None else []),
        "Review the pending proposal now and answer with `submit_review`.",
    ]), cut
