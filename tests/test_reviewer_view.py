"""The reviewer reads what the student saw: no part is cut below the student's view; a context-budget cut
of the oldest turns is stated in the reviewer's prompt and counted in reviews.jsonl."""

from __future__ import annotations

from pathlib import Path

import tests.reviewer_helpers as rv
from tests.test_reviewer_kinds import ScriptedModel, llm_hook, submit
from unscaffold.llm.types import AssistantResponse, Message, ToolCall
from unscaffold.reviewer.base import ContextCut
from unscaffold.reviewer.render import fit_transcript, omission_note


def long_transcript(results: list[str], reasoning: str = "") -> list[Message]:
    rows = [Message(role="system", content="sys"), Message(role="user", content="Do the task.")]
    for i, result in enumerate(results):
        rows.append(AssistantResponse(reasoning=reasoning or None, tool_calls=[
            ToolCall(id=f"c{i}", name="execute", arguments={"command": f"cat part{i}"})]).to_message())
        rows.append(Message(role="tool", tool_call_id=f"c{i}", name="execute", content=result))
    return rows


def test_every_part_reaches_the_reviewer_whole() -> None:
    result, reasoning = "r" * 20_000 + "END", "why " * 2_000
    text, cut = fit_transcript(long_transcript([result], reasoning))
    assert cut == ContextCut()
    assert f"## Turn 1: result\n{result}" in text
    assert f"Reasoning:\n{reasoning}" in text
    assert "elided" not in text and "Context budget" not in text


def test_the_oldest_turns_go_first_and_the_prompt_says_so() -> None:
    blocks = ["a" * 400, "b" * 400, "c" * 400]
    text, cut = fit_transcript(long_transcript(blocks), budget=1_000)
    # head 48 characters, 952 left: the last result (418) and reply (59) and the result before (418) fit
    turn = "## Turn 1: student\nCommand (execute):\n```bash\ncat part0\n```"
    assert len(turn) == 59
    assert cut == ContextCut(omitted_blocks=3, omitted_turns=2, omitted_chars=2 * 59 + 418)
    assert omission_note(cut) in text
    assert omission_note(cut) == ("[Context budget: the 3 oldest blocks (2 student turns, 536 characters) are not "
                                  "shown here. The student saw them; do not assume anything about them beyond "
                                  "what the turns shown support.]")
    assert "a" * 400 not in text and f"## Turn 2: result\n{'b' * 400}" in text and "## Turn 2: student" not in text
    assert text.startswith("## Student system prompt\nsys\n\n## Task\nDo the task.\n\n[Context budget:")


def test_a_newest_block_over_the_budget_keeps_head_and_tail_marked() -> None:
    text, cut = fit_transcript(long_transcript(["x" * 10_000]), budget=5_000)
    block = "## Turn 1: result\n" + "x" * 10_000
    room = 5_000 - len("## Student system prompt\nsys") - len("## Task\nDo the task.")
    assert room == 4_952  # all of it goes to the newest block; the reply before it is left out, and said so
    assert cut == ContextCut(omitted_blocks=1, omitted_turns=1, omitted_chars=59, cut_chars=len(block) - room)
    assert f"[... {len(block) - room} characters elided ...]" in text and "Context budget: the 1 oldest" in text


def test_the_cut_is_counted_in_reviews_jsonl(tmp_path: Path) -> None:
    model = ScriptedModel([submit("s1", rv.passes()), submit("s2", rv.passes())])
    hook = llm_hook(tmp_path, model, None)
    hook(long_transcript(["ok\n[exit_code=0]"]), rv.proposal("ls"))
    hook(long_transcript(["y" * 150_000, "z" * 150_000]), rv.proposal("ls"))
    lines = rv.read_log(tmp_path / "reviews.jsonl")
    assert lines[0]["context_cut"] == {"omitted_blocks": 0, "omitted_turns": 0, "omitted_chars": 0, "cut_chars": 0}
    first_result = "## Turn 1: result\n" + "y" * 150_000
    assert lines[1]["context_cut"] == {"omitted_blocks": 2, "omitted_turns": 1, "omitted_chars": len(
        "## Turn 1: student\nCommand (execute):\n```bash\ncat part0\n```") + len(first_result), "cut_chars": 0}
    sent = model.sent[1][0][1].content
    assert "[Context budget: the 2 oldest blocks (1 student turns," in sent and "z" * 150_000 in sent
