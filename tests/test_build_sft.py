"""`build-sft`: adversarial reviewers leak K, component ids, canaries and reviewer wording; audits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers import BWRAP, EXAMPLES, HARBOR_EXAMPLES, HARBOR_REPLAY, ROOT
from unscaffold.cli import app
from unscaffold.minimal_harness.tool import system_prompt
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run
from unscaffold.sft.build import build_row, build_sft
from unscaffold.suites import find

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
    assert set(row) == {"messages", "tools", "task_id", "trial_id", "replacements", "masked_reasoning_turns",
                        "source"}
    assert row["source"] == "reviewer_k"
    assert CANARY not in out.read_text()
    assert CANARY not in (tmp_path / "data.report.json").read_text()
    assert [d.model_dump(exclude={"run"}) for d in report.drops] == [
        {"trial_id": "csv-total", "reason": "leak:component_id", "marker": "check:show_before_finish",
         "context": 'sistant","content":"Following check:show_before_finish, I look first.","reasoning_co'},
        {"trial_id": "fix-fibonacci", "reason": "leak:canary", "marker": "<canary>",
         "context": '"","reasoning_content":"Token <canary>: the bound is one short.","to'},
        {"trial_id": "hello-file", "reason": "leak:k_path", "marker": str(K),
         "context": f"d!' > /app/hello.txt  # as in {K}/memory.md\"}}}}}}]}},{{\"role\":\"tool"},
    ]
    assert {d.run for d in report.drops} == {str(adversarial_run)}


def test_rows_load_with_datasets_and_render_with_a_chat_template(adversarial_run: Path, tmp_path: Path) -> None:
    import datasets

    out = tmp_path / "data.jsonl"
    build_sft([adversarial_run], out, keep_all=True)
    ds = datasets.load_dataset("json", data_files=str(out), split="train")
    assert ds.num_rows == 2  # keep-all keeps any reward, but leaks are still dropped (no canary set here)
    assert ds[0]["messages"][0]["role"] == "system"
    from jinja2 import Template

    from unscaffold.offline.tiny import read_trl_template

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
        (lambda t: t["messages"][4].update(reasoning_content="x</parameter>"), "audit:markup_in_text"),
        (lambda t: t["messages"][4].update(content="<|eot_id|>"), "audit:markup_in_text"),
        (lambda t: (t["messages"][2]["tool_calls"][0]["function"]["arguments"].update(
            command="echo '<|im_end|>\n<|im_start|>user'"), t["steps"][0].update(
            command="echo '<|im_end|>\n<|im_start|>user'")), "audit:markup_in_tool_call"),
        (lambda t: t["messages"][2]["tool_calls"][0]["function"].update(
            arguments='{"command": "ls </function>"}'), "audit:markup_in_tool_call"),
        (lambda t: t["messages"][2]["tool_calls"][0]["function"].update(name="execute<tool_call>"),
         "audit:markup_in_tool_call"),
        (lambda t: t["messages"][3].update(content="<|im_end|> printed by a command"), None),
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
    row, why = build_row(traj, [], system_prompt(), audits=("final-answer", "format-errors"))
    assert why == reason
    assert (row is not None) == (reason is None)


def test_visible_history_must_match_the_review_log() -> None:
    traj = _traj()
    reviews = [{"turn": 1, "decision": "REPLACE", "proposal": {"tool_calls": []},
                "replacement": {"tool_call": {"name": "execute", "arguments": {"command": "pwd"}}}}]
    assert build_row(traj, reviews, system_prompt())[1] == "audit:review_log_mismatch"
    reviews[0]["replacement"]["tool_call"]["arguments"]["command"] = "ls"
    assert build_row(traj, reviews, system_prompt())[1] is None


def test_drop_reasons_are_one_enumeration_each_explained_in_the_docs() -> None:
    from tests.helpers import ROOT
    from unscaffold.outcomes import ERROR_OUTCOMES
    from unscaffold.sft.drop_reasons import EXPLAINED, DropReason
    from unscaffold.sft.scrub import build_markers
    from unscaffold.untrusted import REFUSED

    assert set(EXPLAINED) == set(DropReason) and len({r.value for r in DropReason}) == len(DropReason)
    assert set(ERROR_OUTCOMES) | {REFUSED} <= {r.value for r in DropReason}
    assert set(build_markers([], ["x"]).by_reason) <= set(DropReason)
    page = (ROOT / "docs" / "build-sft.md").read_text()
    for reason in DropReason:
        assert f"| `{reason.value}` | {EXPLAINED[reason]} |" in page


def _synthetic_run(root: Path, trials: int) -> Path:
    """Trials of the perf script's shape: every 20th low-reward, odd ones with reviewer-voice reasoning."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "perf"))
    from build_sft_throughput import write_run

    return write_run(root, trials, 6)


def test_worker_processes_give_the_same_rows_and_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import unscaffold.sft.build as sft_build

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
    import unscaffold.sft.build as sft_build

    run_dir = _synthetic_run(tmp_path, 12)
    bad = run_dir / "trials" / "t00009" / "trajectory.json"
    bad.write_text("{not json")
    monkeypatch.setattr(sft_build, "PARALLEL_FROM", 4)
    result = CliRunner().invoke(app, ["build-sft", str(run_dir), "--out", str(tmp_path / "d.jsonl")])
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {bad}: invalid JSON: ")
    assert not (tmp_path / "d.jsonl").exists()
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == []  # no part file left behind


def _break(trial: Path, case: str) -> None:
    traj = json.loads((trial / "trajectory.json").read_text())
    if case == "no_messages":
        del traj["messages"]
    elif case == "no_role":
        del traj["messages"][2]["role"]
    elif case == "index":
        traj["steps"][0]["message_index"] = "two"
    elif case == "review":
        (trial / "reviews.jsonl").write_text('{"turn": 1, "decision": "PASS"}\n5\n')
    elif case == "result":
        (trial / "result.json").write_text("[1]")
    (trial / "trajectory.json").write_text(json.dumps(traj))


@pytest.mark.parametrize(("case", "name", "message"), [
    ("no_messages", "trajectory.json", "messages: Field required"),
    ("no_role", "trajectory.json", "messages.2.role: Field required"),
    ("index", "trajectory.json", "steps.0.message_index: Input should be a valid integer, unable to parse string "
                                 "as an integer"),
    ("review", "reviews.jsonl", "a review line is not as the harness writes it (AttributeError: 'int' object has no "
                                "attribute 'get')"),
    ("result", "result.json", "expected a JSON object"),
])
def test_a_file_of_the_wrong_shape_is_one_line_naming_file_and_field(tmp_path: Path, case: str, name: str,
                                                                    message: str) -> None:
    run_dir = _synthetic_run(tmp_path, 3)
    _break(run_dir / "trials" / "t00001", case)
    result = CliRunner().invoke(app, ["build-sft", str(run_dir), "--out", str(tmp_path / "d.jsonl")])
    assert (result.exit_code, result.output) == (2, f"error: {run_dir / 'trials' / 't00001' / name}: {message}\n")


SHIPPED_KS = [find(suite).k for suite in ("spreadsheet", "retrosynthesis")]


def _row_bytes(command: str, content: str = "", reasoning: str = "") -> bytes:
    import orjson

    call = {"id": "call_1", "type": "function", "function": {"name": "execute", "arguments": {"command": command}}}
    return orjson.dumps({"messages": [
        {"role": "assistant", "content": content, "reasoning_content": reasoning, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok\n[exit_code=0]"}]})


@pytest.mark.parametrize(("command", "content", "hit"), [
    ("pip install openpyxl", "", None),
    ("python3 -m pip install rdkit", "Successfully installed rdkit-2026.9.1", None),
    ("ls", "The student grades are filled in D2:D20.", None),
    ("ls", "installed\nstalling\nstall-free\nreinstall", None),
    ("ls", "Following check:stall, I act.", ("leak:component_id", "check:stall")),
    ("stall", "", ("leak:component_name", "stall")),
    ("ls", "then\nstall\tagain", ("leak:component_name", "stall")),
    ("python3 verify_output.py out.xlsx", "", ("leak:component_name", "verify_output")),
    ("cat middleware/stall.md", "", ("leak:k_path", "middleware/stall.md")),
])
def test_markers_of_the_shipped_ks_match_whole_tokens(command: str, content: str, hit: tuple | None) -> None:
    from unscaffold.knowledge.kfolder import load_k
    from unscaffold.sft.scrub import build_markers

    markers = build_markers([load_k(k) for k in SHIPPED_KS], [])
    found = markers.find(_row_bytes(command, content))
    assert (found.reason, found.marker) == hit if hit else found is None


def test_a_marker_after_a_json_escape_is_found_and_shown_in_context() -> None:
    from unscaffold.sft.scrub import build_markers

    markers = build_markers([], ["naïve-CANARY"])
    data = _row_bytes("ls", 'a "quoted"\tnaïve-CANARY\u00e9 end', "")
    assert markers.find(data) is None  # followed by a letter: not a whole token
    hit = markers.find(_row_bytes("ls", 'a "quoted"\tnaïve-CANARY. end'))
    assert (hit.reason, hit.marker) == ("leak:canary", "<canary>")
    assert hit.context == 'ant","content":"a \\"quoted\\"\\t<canary>. end","reasoning_content":"",'
    escaped = build_markers([], ['say "hi"'])
    assert escaped.find(_row_bytes("ls", 'they say "hi" here')).marker == '<canary>'
    assert escaped.find(_row_bytes("ls", 'they say "hi"s')) is None


@pytest.mark.parametrize(("text", "voice"), [
    ("The student grades are filled in D2:D20.", False),
    ("I review the totals, then rewrite the summary file.", False),
    ("The proposal sheet lists 12 items; a student of chemistry would check the ring.", False),
    ("I pass the response to jq and compute the student answers in C2:C9.", False),
    ("The student missed 3 classes, so the student responses are blank.", False),
    ("The student's proposal ignores ties, so I rewrite it with a second sort key.", True),
    ("The student proposal skipped a check.", True),
    ("The proposed command misses the header row.", True),
    ("I replace this step with one that reads the sheet first.", True),
    ("As the reviewer, I see no evidence of a write.", True),
    ("The student should compare the output first.", True),
    ("This draft response finishes too early.", True),
])
def test_reviewer_wording_is_the_reviewers_voice_not_common_words(text: str, voice: bool) -> None:
    from unscaffold.sft.scrub import REVIEWER_VOICE_PATTERNS, REVIEWER_WORDING

    assert bool(REVIEWER_WORDING.search(text)) is voice
    page = (ROOT / "docs" / "build-sft.md").read_text()
    for pattern in REVIEWER_VOICE_PATTERNS:
        assert f"`{pattern}`" in page


def test_reviewer_wording_in_content_is_reported_with_context() -> None:
    from unscaffold.sft.build import judge_row

    def voiced(t: dict) -> None:
        t["messages"][4]["content"] = "As the reviewer, I accept. done"
        t["steps"][1]["replaced"] = True
        t["final_answer"] = t["messages"][4]["content"]

    row, why, hit = judge_row(_traj(voiced), [], system_prompt())
    assert (row, why) == (None, "reviewer_wording_in_content")
    assert (hit.marker, hit.context) == ("reviewer", "As the reviewer, I accept. done")


def test_keep_all_keeps_every_trial_with_a_trajectory_and_names_the_rest(tmp_path: Path) -> None:
    run_dir = _synthetic_run(tmp_path, 6)
    trials = run_dir / "trials"
    turn_limit = json.loads((trials / "t00001" / "trajectory.json").read_text())
    turn_limit.update(exit_status="turn_limit", final_answer=None)
    turn_limit["messages"].pop()
    turn_limit["steps"].pop()
    (trials / "t00001" / "trajectory.json").write_text(json.dumps(turn_limit))
    (trials / "t00001" / "reviews.jsonl").write_text("")
    malformed = json.loads((trials / "t00002" / "trajectory.json").read_text())
    malformed["steps"][0]["format_error"] = "Format error: two tool calls"
    (trials / "t00002" / "trajectory.json").write_text(json.dumps(malformed))
    (trials / "t00003" / "result.json").write_text(json.dumps({"outcome": "infra_error", "reward": 0.0}))
    (trials / "t00004" / "result.json").unlink()
    (trials / "t00005" / "result.json").write_text(json.dumps({"reward": 0.0, "exception": "boom"}))
    (trials / "t00006").mkdir()  # an exception before the first step: a result, no trajectory
    (trials / "t00006" / "result.json").write_text(json.dumps({"reward": 0.0, "exception": "sandbox refused"}))
    strict = build_sft([run_dir], tmp_path / "strict.jsonl", audits=["final-answer", "format-errors"])
    assert strict.dropped == {"audit:no_final_answer": 1, "exception": 2, "format_error": 1, "infra_error": 1,
                              "low_reward": 1, "unfinished": 1}
    paper = build_sft([run_dir], tmp_path / "paper.jsonl")  # the recipe's filter: reward 1.0, no exception
    assert paper.dropped == {"exception": 2, "infra_error": 1, "low_reward": 1, "unfinished": 1}
    assert (paper.kept, paper.audits, paper.untrained_turns) == (2, [], 1)  # the turn-limit and malformed trials
    result = CliRunner().invoke(app, ["build-sft", str(run_dir), "--out", str(tmp_path / "all.jsonl"), "--keep-all"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "all.report.json").read_text())
    assert (report["trials"], report["kept"]) == (7, 4)
    assert [(d["run"], d["trial_id"], d["reason"], d["marker"]) for d in report["drops"]] == [
        (str(run_dir), "t00003", "infra_error", ""), (str(run_dir), "t00004", "unfinished", ""),
        (str(run_dir), "t00006", "no_trajectory", "")]
    assert "dropped t00003: infra_error\ndropped t00004: unfinished\ndropped t00006: no_trajectory\n" in result.output
    kept = [json.loads(line)["trial_id"] for line in (tmp_path / "all.jsonl").read_text().splitlines()]
    assert kept == ["t00000", "t00001", "t00002", "t00005"]


def test_workers_are_forked_only_from_a_single_threaded_process() -> None:
    import subprocess
    import sys
    import threading

    from unscaffold.sft.build import pool_context
    from unscaffold.sft.scrub import build_markers

    code = ("from unscaffold.sft.build import pool_context; from unscaffold.sft.scrub import "
            "build_markers; print(pool_context(build_markers([], [])).get_start_method())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout == "fork\n"
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert pool_context(build_markers([], [])).get_start_method() == "forkserver"
    finally:
        stop.set()
        other.join()


def test_this_process_judges_the_chunks_no_worker_has_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker slow to start holds its first chunk; meanwhile this process judges the others from the back,
    and the rows come out in order, as one process writes them."""
    import io
    import os
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import unscaffold.sft.build as sft_build
    from unscaffold.minimal_harness.tool import system_prompt
    from unscaffold.sft.scrub import build_markers

    run_dir = _synthetic_run(tmp_path, 12)
    monkeypatch.setattr(sft_build, "PARALLEL_FROM", 4)
    monkeypatch.setattr(sft_build, "CHUNK", 3)
    here, release, judged_by = threading.get_ident(), threading.Event(), {}
    judge_part = sft_build.judge_part

    def recorded(judge: sft_build.Judge, trials: list[str], part: str) -> sft_build.Tally:
        chunk = part.rsplit(".", 1)[1]
        judged_by[chunk] = "this" if threading.get_ident() == here else "worker"
        if judged_by[chunk] == "worker":
            assert release.wait(60)
        elif chunk == "1":
            release.set()
        return judge_part(judge, trials, part)

    monkeypatch.setattr(sft_build, "judge_part", recorded)
    judge = sft_build.Judge(build_markers([], []), system_prompt(), 1.0, False)
    trials = sorted(str(p) for p in (run_dir / "trials").iterdir())
    spread, alone = io.BytesIO(), io.BytesIO()
    with open(tmp_path / "spread.jsonl", "wb") as sink, ThreadPoolExecutor(1) as pool:
        tally = sft_build.judge_run(judge, trials, sink, pool, str(tmp_path / "parts"))
    spread.write((tmp_path / "spread.jsonl").read_bytes())
    one = sft_build.judge_into(judge, trials, alone)
    assert judged_by == {"0": "worker", "3": "this", "2": "this", "1": "this"}
    assert spread.getvalue() == alone.getvalue() and spread.getvalue().count(b"\n") == 11
    assert (tally.kept, tally.dropped, [d.trial_id for d in tally.drops]) == (one.kept, one.dropped, ["t00000"])
    assert not [name for name in os.listdir(tmp_path) if name.startswith("parts")]
