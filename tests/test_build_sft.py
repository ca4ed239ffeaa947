"""`build-sft`: adversarial reviewers leak K, component ids, canaries and reviewer wording; audits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import BWRAP, EXAMPLES, HARBOR_EXAMPLES, HARBOR_REPLAY
from unscaffold.cli import app
from unscaffold.collect.models import RunConfig
from unscaffold.collect.runner import run
from unscaffold.collect.sft_build import build_row, build_sft
from unscaffold.minimal_harness.tool import system_prompt

K = (EXAMPLES / "hstar" / "harbor_k").resolve()
CANARY = "CANARY-7f3a9c"
PASS = {"decision": "PASS", "reason": "Sound next step."}


def replace(command: str, reasoning: str = "I print it to check.", content: str = "") -> dict:
    return {"decision": "REPLACE", "reason": "Correction.", "replacement": {
        "reasoning": reasoning, "content": content,
        "tool_call": {"name": "execute", "arguments": {"command": command}}}}


ADVERSARIAL = {
    "hello-file": [replace(f"echo 'Hello, world!' > /app/hello.txt  # as in {K}/memory.md"), PASS],
    "csv-total": [replace("head -5 sales.csv", content="Following check:show_before_finish, I look first."),
                  PASS, PASS],
    "word-stats": [replace("tr 'A-Z' 'a-z' < text.txt | grep -oE '[a-z]+' | sort | uniq -c | sort -k1,1nr -k2,2 "
                           "| head -3 | awk '{print $2, $1}' > top3.txt; cat top3.txt",
                           reasoning="The student's proposal ignores ties, so I rewrite it with a second sort key."),
                   PASS],
    "fix-fibonacci": [PASS, replace("sed -i 's/range(n - 1)/range(n)/' fib.py && python3 fib.py 10",
                                    reasoning=f"Token {CANARY}: the bound is one short."), PASS],
}


@pytest.fixture(scope="module")
def adversarial_run(tmp_path_factory) -> Path:
    if not BWRAP:
        pytest.skip("bubblewrap is not installed or not usable here")
    root = tmp_path_factory.mktemp("adv")
    reviewer = root / "reviewer.json"
    reviewer.write_text(json.dumps(ADVERSARIAL))
    summary = run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student=f"replay:{HARBOR_REPLAY}",
                            reviewer=f"replay:{reviewer}", knowledge=K, budget=5, out=root / "run", concurrency=2))
    assert summary.per_task == {"csv-total": 1.0, "fix-fibonacci": 1.0, "hello-file": 1.0, "word-stats": 1.0}
    assert summary.replacements == 4
    return root / "run"


def test_leaks_are_dropped_by_reason_and_reviewer_voice_is_masked(adversarial_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "data.jsonl"
    report = build_sft([adversarial_run], out, canaries=[CANARY])
    assert report.trials == 4 and report.kept == 1
    assert report.dropped == {"leak:canary": 1, "leak:component_id": 1, "leak:k_path": 1}
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["trial_id"] for r in rows] == ["word-stats"]
    row = rows[0]
    assert row["masked_reasoning_turns"] == [2]
    assert row["messages"][2]["reasoning_content"].startswith("The student's proposal ignores ties")
    assert row["replacements"] == 1
    assert set(row) == {"messages", "tools", "task_id", "trial_id", "replacements", "masked_reasoning_turns"}
    assert CANARY not in out.read_text()
    assert CANARY not in (tmp_path / "data.report.json").read_text()


def test_rows_load_with_datasets_and_render_with_a_chat_template(adversarial_run: Path, tmp_path: Path) -> None:
    import datasets

    out = tmp_path / "data.jsonl"
    build_sft([adversarial_run], out, keep_all=True)
    ds = datasets.load_dataset("json", data_files=str(out), split="train")
    assert ds.num_rows == 2  # keep-all keeps any reward, but leaks are still dropped (no canary set here)
    assert ds[0]["messages"][0]["role"] == "system"
    from jinja2 import Template

    from unscaffold.llm.tiny import read_trl_template

    template = read_trl_template("qwen3")
    text = Template(template).render(messages=ds[0]["messages"], tools=ds[0]["tools"], add_generation_prompt=False)
    assert "<tool_call>" in text and "execute" in text


def test_cli_report_and_min_reward(tmp_path: Path) -> None:
    if not BWRAP:
        pytest.skip("bubblewrap is not installed or not usable here")
    run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student=f"replay:{HARBOR_REPLAY}", out=tmp_path / "eval"))
    result = CliRunner().invoke(app, ["build-sft", str(tmp_path / "eval"), "--out", str(tmp_path / "d.jsonl"),
                                      "--min-reward", "0.5"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "d.report.json").read_text())
    assert report["kept"] == 3 and report["dropped"] == {"low_reward": 1}
    assert "3/4 trials kept" in result.output


def _traj(change=None) -> dict:
    messages = [
        {"role": "system", "content": system_prompt()},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "execute", "arguments": {"command": "ls"}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a\n[exit_code=0]"},
        {"role": "assistant", "content": "done"},
    ]
    steps = [{"turn": 1, "message_index": 2, "command": "ls"}, {"turn": 2, "message_index": 4}]
    traj = {"trial_id": "t", "task_id": "t", "tools": [], "messages": messages, "steps": steps,
            "exit_status": "submitted", "final_answer": "done", "harness": "minimal"}
    if change:
        change(traj)
    return traj


@pytest.mark.parametrize(
    "change,reason",
    [
        (None, None),
        (lambda t: t["steps"][0].update(command="rm -rf /"), "audit:command_mismatch"),
        (lambda t: t["messages"].insert(4, {"role": "tool", "tool_call_id": "zz", "content": "x"}),
         "audit:orphan_observation"),
        (lambda t: t["messages"][4].update(content="done <|im_end|>"), "audit:markup_in_text"),
        (lambda t: t.update(exit_status="turn_limit", final_answer=None), "audit:no_final_answer"),
        (lambda t: t["messages"][0].update(content="You are a different agent."), "audit:system_prompt_changed"),
        (lambda t: t["messages"].pop(1), "audit:no_task_opening"),
        (lambda t: t["steps"][1].update(message_index=3), "audit:step_not_assistant"),
        (lambda t: t["steps"][1].update(message_index=40), "audit:step_not_assistant"),
        (lambda t: t.update(harness="hstar"), "not_deployment_harness"),
        (lambda t: t["steps"][0].update(format_error="Format error: ..."), "format_error"),
    ],
)
def test_audit_reasons(change, reason) -> None:
    traj = _traj(change)
    row, why = build_row(traj, [], system_prompt())
    assert why == reason
    assert (row is not None) == (reason is None)


def test_visible_history_must_match_the_review_log() -> None:
    traj = _traj()
    reviews = [{"turn": 1, "decision": "REPLACE", "proposal": {"tool_calls": []},
                "replacement": {"tool_call": {"name": "execute", "arguments": {"command": "pwd"}}}}]
    assert build_row(traj, reviews, system_prompt())[1] == "audit:review_log_mismatch"
    reviews[0]["replacement"]["tool_call"]["arguments"]["command"] = "ls"
    assert build_row(traj, reviews, system_prompt())[1] is None


def test_drop_reasons_are_one_enumeration_each_explained_in_the_readme() -> None:
    from tests.conftest import ROOT
    from unscaffold.collect.drop_reasons import EXPLAINED, DropReason
    from unscaffold.collect.models import ERROR_OUTCOMES
    from unscaffold.collect.scrub import build_markers
    from unscaffold.untrusted import REFUSED

    assert set(EXPLAINED) == set(DropReason) and len({r.value for r in DropReason}) == len(DropReason)
    assert set(ERROR_OUTCOMES) | {REFUSED} <= {r.value for r in DropReason}
    assert set(build_markers([], ["x"]).by_reason) <= set(DropReason)
    readme = (ROOT / "README.md").read_text()
    for reason in DropReason:
        assert f"| `{reason.value}` | {EXPLAINED[reason]} |" in readme


def _synthetic_run(root: Path, trials: int) -> Path:
    """Trials of the perf script's shape: every 20th low-reward, odd ones with reviewer-voice reasoning."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "perf"))
    from build_sft_throughput import write_run

    return write_run(root, trials, 6)


def test_worker_processes_give_the_same_rows_and_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import unscaffold.collect.sft_build as sft_build

    run_dir = _synthetic_run(tmp_path, 40)
    (run_dir / "trials" / "t00007" / "result.json").write_text(json.dumps({"outcome": "verifier_error"}))
    monkeypatch.setattr(sft_build, "PARALLEL_FROM", 4)
    monkeypatch.setattr(sft_build, "CHUNK", 3)  # 14 part files, appended in order
    appended = []
    append = sft_build.append_file
    monkeypatch.setattr(sft_build, "append_file", lambda sink, part: appended.append(part) or append(sink, part))
    one = build_sft([run_dir], tmp_path / "one.jsonl", workers=1)
    assert appended == []
    two = build_sft([run_dir], tmp_path / "two.jsonl", workers=2)
    assert [p.rsplit(".", 1)[1] for p in appended] == [str(n) for n in range(14)]
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()
    assert one.model_dump(exclude={"out"}) == two.model_dump(exclude={"out"})
    assert (one.trials, one.kept, one.dropped) == (40, 37, {"low_reward": 2, "verifier_error": 1})
    rows = [json.loads(line) for line in (tmp_path / "two.jsonl").read_text().splitlines()]
    assert [r["trial_id"] for r in rows][:3] == ["t00001", "t00002", "t00003"]


def test_a_bad_file_in_a_worker_is_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import unscaffold.collect.sft_build as sft_build

    run_dir = _synthetic_run(tmp_path, 12)
    bad = run_dir / "trials" / "t00009" / "trajectory.json"
    bad.write_text("{not json")
    monkeypatch.setattr(sft_build, "PARALLEL_FROM", 4)
    result = CliRunner().invoke(app, ["build-sft", str(run_dir), "--out", str(tmp_path / "d.jsonl")])
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {bad}: invalid JSON: ")
    assert not (tmp_path / "d.jsonl").exists()
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == []  # no part file left behind
