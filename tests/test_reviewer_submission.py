"""The review submission format check: one exact line per kind of mistake."""

from __future__ import annotations

import pytest

from unscaffold.llm.types import AssistantResponse, ToolCall
from unscaffold.reviewer.submission import InvalidSubmission, Replacement, ReviewSubmission, check_submission

EXEC = {"name": "execute", "arguments": {"command": "ls"}}


def replace(replacement: object, reason: str = "fix") -> dict:
    return {"decision": "REPLACE", "replacement": replacement, "reason": reason}


@pytest.mark.parametrize(
    "raw,message",
    [
        ("{not json", "submission is not valid JSON: Expecting property name enclosed in double quotes"),
        ("", "submission is not valid JSON: Expecting value"),
        ("[1, 2]", "submission must be a JSON object"),
        ('"PASS"', "submission must be a JSON object"),
        ({"decision": "PASS", "reason": "ok", "confidence": 0.9}, "unknown field `confidence`"),
        ({"reason": "ok"}, "decision must be PASS or REPLACE"),
        ({"decision": "pass", "reason": "ok"}, "decision must be PASS or REPLACE"),
        ({"decision": "PASS", "replacement": {"content": "x"}, "reason": "ok"}, "PASS carries no replacement"),
        ({"decision": "REPLACE", "reason": "ok"}, "REPLACE needs a replacement"),
        ({"decision": "REPLACE", "replacement": None, "reason": "ok"}, "REPLACE needs a replacement"),
        (replace({}), "the replacement needs visible content or an `execute` call"),
        (replace({"reasoning": "only thinking", "content": "  "}),
         "the replacement needs visible content or an `execute` call"),
        (replace({"tool_call": {"name": "bash", "arguments": {"command": "ls"}}}),
         "the replacement may only call `execute` (got `bash`)"),
        (replace({"tool_call": {"arguments": {"command": "ls"}}}),
         "the replacement may only call `execute` (got `None`)"),
        (replace({"tool_call": {"name": "execute", "arguments": {"command": "  "}}}),
         "the replacement's `execute` call needs one non-empty string `command`"),
        (replace({"tool_call": {"name": "execute", "arguments": {"command": 3}}}),
         "the replacement's `execute` call needs one non-empty string `command`"),
        (replace({"tool_call": {"name": "execute", "arguments": {"command": "ls", "timeout": 5}}}),
         "the replacement's `execute` call needs one non-empty string `command`"),
        (replace({"tool_call": {"name": "execute", "arguments": {}}}),
         "the replacement's `execute` call needs one non-empty string `command`"),
        (replace({"content": "x", "note": 1}), "unknown field `replacement.note`"),
        (replace({"tool_call": EXEC}, reason=""), "reason must be 1-500 characters (got 0)"),
        (replace({"tool_call": EXEC}, reason="   "), "reason must be 1-500 characters (got 0)"),
        (replace({"tool_call": EXEC}, reason="r" * 501), "reason must be 1-500 characters (got 501)"),
        ({"decision": "PASS"}, "reason must be 1-500 characters (got 0)"),
        ({"decision": "PASS", "reason": "ok", "components_used": "check:x"},
         "components_used must be a list of component ids (strings)"),
    ],
)
def test_invalid_submissions_name_the_problem(raw, message) -> None:
    with pytest.raises(InvalidSubmission) as e:
        check_submission(raw, None)
    assert str(e.value) == message


def test_unknown_components_only_checked_against_k() -> None:
    raw = {"decision": "PASS", "reason": "ok", "components_used": ["check:a", "x:b", "y:c", "x:b"]}
    assert check_submission(raw, None).components_used == ["check:a", "x:b", "y:c", "x:b"]
    with pytest.raises(InvalidSubmission) as e:
        check_submission(raw, {"check:a"})
    assert str(e.value) == "unknown components_used: x:b, y:c"


def test_valid_submissions() -> None:
    assert check_submission('{"decision": "PASS", "reason": "fine"}') == ReviewSubmission(decision="PASS",
                                                                                          reason="fine")
    fenced = '```json\n{"decision": "PASS", "reason": "fine", "replacement": null}\n```'
    assert check_submission(fenced).decision == "PASS"
    sub = check_submission(replace({"reasoning": "r", "tool_call": {"name": "execute",
                                                                    "arguments": '{"command": "ls -la"}'}},
                                   reason="r" * 500))
    assert sub.replacement is not None and sub.replacement.tool_call.arguments == {"command": "ls -la"}
    final = check_submission(replace({"content": "The answer is 4."}))
    assert final.replacement == Replacement(content="The answer is 4.")


def test_replacement_to_response() -> None:
    r = Replacement(reasoning="I check first.", content=None, tool_call={"name": "execute",
                                                                          "arguments": {"command": "ls"}})
    assert r.to_response("review_3") == AssistantResponse(
        reasoning="I check first.", tool_calls=[ToolCall(id="review_3", name="execute", arguments={"command": "ls"})]
    )
    assert Replacement(content="done").to_response("review_1") == AssistantResponse(content="done")
