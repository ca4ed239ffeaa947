"""The leak scan's first pass over many rows at once: it never clears a row `find` would drop."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import orjson
import pytest

from unscaffold.knowledge.kfolder import load_k
from unscaffold.sft.build import build_sft
from unscaffold.sft.scrub import Markers, build_markers
from unscaffold.suites import find

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_K = find("spreadsheet").k
CANARIES = ["café-42", 'say "hi"']


def row(text: str) -> bytes:
    return orjson.dumps({"messages": [{"role": "assistant", "content": text}]})


TEXTS = [
    ("pip install openpyxl && echo installed", False),
    ("The student grades are filled in D2:D20.", False),
    ("following check:stall now", True),
    ("stall", True),
    ("python3 verify_output.py", True),
    ("line one\nstall", True),  # after a JSON escape
    ("é stall é", True),
    ("éstall", False),  # a non-ASCII letter touches it: not a whole token
    ("the café-42 menu", True),
    ('they say "hi" twice', True),
    ("café-421", False),
]


def test_prefilter_flags_exactly_the_rows_with_whole_token_markers() -> None:
    markers = build_markers([load_k(SHIPPED_K)], CANARIES)
    rows = [row(text) for text, _ in TEXTS]
    assert markers.prefilter(rows) == [flag for _, flag in TEXTS]
    assert [markers.find(r) is not None for r in rows] == [flag for _, flag in TEXTS]
    # the same rows written with every non-ASCII character escaped, as `json.dumps` does by default
    ascii_rows = [json.dumps({"c": text}).encode() for text, _ in TEXTS]
    found = [markers.find(r) is not None for r in ascii_rows]
    assert all(flag for flag, hit in zip(markers.prefilter(ascii_rows), found, strict=True) if hit)
    assert found[2:7] == [True] * 5 and found[8:10] == [True, True]


def test_without_pyarrow_every_row_is_scanned_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow.compute", None)
    markers = Markers()
    markers.add("leak:canary", ["stall", "sheet_a", "sheet_b", "sheet_c"])
    assert markers.needs_automaton()
    assert markers.prefilter([row("pip install"), row("stall"), row("no marker here")]) == [True, True, True]
    assert markers.prefilter([]) == []


def test_a_few_forms_are_a_substring_pass_that_flags_near_misses_for_the_exact_scan(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow.compute", None)  # never needed for a few forms
    markers = build_markers([], ["café-42"])  # the reviewer's tool name, and the canary raw and escaped: 3 forms
    assert markers.literals() == [b"caf\\u00e9-42", "café-42".encode(), b"submit_review"]
    assert not markers.needs_automaton()
    rows = [row("pip install"), row("call submit_review now"), row("the café-421 menu"),
            json.dumps({"c": "a café-42"}).encode()]
    assert markers.prefilter(rows) == [False, True, True, True]
    assert [hit.reason if (hit := markers.find(r)) else None for r in rows] == [
        None, "leak:reviewer_tool", None, "leak:canary"]


def test_build_sft_keeps_and_drops_the_same_rows_with_and_without_the_first_pass(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(ROOT / "perf"))
    from build_sft_throughput import write_run

    run = write_run(tmp_path, 70, 12, SHIPPED_K)
    for n in (5, 64, 66):  # leaks in both batches of 64 rows: a check name as a command, a canary
        path = run / "trials" / f"t{n:05d}" / "trajectory.json"
        traj = json.loads(path.read_text())
        traj["messages"][-1]["content"] = "Ran stall first." if n != 64 else "café-42 done."
        traj["final_answer"] = traj["messages"][-1]["content"]
        path.write_text(json.dumps(traj))
        reviews = run / "trials" / f"t{n:05d}" / "reviews.jsonl"
        lines = reviews.read_text().splitlines()
        last = json.loads(lines[-1])
        last["proposal"]["content"] = traj["final_answer"]
        reviews.write_text("\n".join([*lines[:-1], json.dumps(last)]) + "\n")
    fast = build_sft([run], tmp_path / "fast.jsonl", canaries=CANARIES)
    monkeypatch.setattr(Markers, "prefilter", lambda self, rows: [True] * len(rows))
    exact = build_sft([run], tmp_path / "exact.jsonl", canaries=CANARIES)
    assert fast.dropped == {"leak:canary": 1, "leak:component_name": 2, "low_reward": 4}
    assert fast.model_dump(exclude={"out"}) == exact.model_dump(exclude={"out"})
    assert (tmp_path / "fast.jsonl").read_bytes() == (tmp_path / "exact.jsonl").read_bytes()
