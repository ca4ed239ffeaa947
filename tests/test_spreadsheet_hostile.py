"""A hostile student's output: links, FIFOs, huge claims and huge files score 0 with the reason, never
read a host file, never hang and never allocate what the workbook merely claims. Gold answers never
exist in the trial folder, not even while scoring."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import zipfile
from pathlib import Path

import openpyxl
import pytest

from tests.helpers import call, final, needs_bwrap
from tests.spreadsheet_books import book, with_cached
from unscaffold.benchmarks.base import Task
from unscaffold.benchmarks.spreadsheet import tasks as builtin
from unscaffold.benchmarks.spreadsheet.measure import reference_policy
from unscaffold.benchmarks.spreadsheet.recalc import Limits, libreoffice
from unscaffold.benchmarks.spreadsheet.scorer import score_case, score_cases
from unscaffold.benchmarks.spreadsheet.suite import SpreadsheetSuite, input_name, output_name
from unscaffold.bounded import LimitExceeded

TASK = "line-totals-1"
OUTPUT = f"output/{output_name(TASK)}"


@pytest.fixture(scope="module")
def suite() -> SpreadsheetSuite:
    return SpreadsheetSuite()


def trial(suite: SpreadsheetSuite, tmp_path: Path) -> tuple[Task, Path]:
    task = next(t for t in suite.tasks() if t.id == TASK)
    suite.prepare(task, tmp_path, "none")
    return task, tmp_path


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir())


def test_the_reference_output_scores_1_and_no_gold_is_left_in_the_trial(suite: SpreadsheetSuite,
                                                                         tmp_path: Path) -> None:
    task, trial_dir = trial(suite, tmp_path)
    workspace = trial_dir / "workspace"
    reference_policy(suite.built[TASK], workspace / "spreadsheets" / input_name(TASK), workspace / OUTPUT)
    score = suite.score(task, trial_dir, None, None)  # type: ignore[arg-type]
    assert (score.reward, score.outcome) == (1.0, None)
    assert files_under(trial_dir) == ["task/task.json", f"workspace/{OUTPUT}",
                                      f"workspace/spreadsheets/{input_name(TASK)}"]


def test_a_link_to_the_golden_is_refused(suite: SpreadsheetSuite, tmp_path: Path) -> None:
    task, trial_dir = trial(suite, tmp_path)
    golden = tmp_path / "elsewhere" / "1_line-totals-1_golden.xlsx"
    builtin.write_workbook(suite.built[TASK].golden, golden)
    (trial_dir / "workspace" / OUTPUT).symlink_to(golden)
    score = suite.score(task, trial_dir, None, None)  # type: ignore[arg-type]
    reason = f"{OUTPUT} is a symbolic link; the scorer follows no links"
    assert (score.reward, score.reason, score.outcome) == (0.0, reason, None)
    assert score.details["refused_artifact"] == [reason]
    assert score.details["cases"][0]["refused_link"] is True


def test_a_linked_output_folder_is_refused(suite: SpreadsheetSuite, tmp_path: Path) -> None:
    task, trial_dir = trial(suite, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    reference_policy(suite.built[TASK], trial_dir / "workspace" / "spreadsheets" / input_name(TASK),
                     elsewhere / output_name(TASK))
    (trial_dir / "workspace" / "output").rmdir()
    (trial_dir / "workspace" / "output").symlink_to(elsewhere)
    score = suite.score(task, trial_dir, None, None)  # type: ignore[arg-type]
    assert (score.reward, score.reason) == (0.0, "output is a symbolic link; the scorer follows no links")


def test_a_fifo_is_refused_without_blocking(suite: SpreadsheetSuite, tmp_path: Path) -> None:
    task, trial_dir = trial(suite, tmp_path)
    os.mkfifo(trial_dir / "workspace" / OUTPUT)
    score = suite.score(task, trial_dir, None, None)  # type: ignore[arg-type]
    assert (score.reward, score.reason) == (0.0, f"{OUTPUT} is a FIFO, not a regular file")


def test_an_oversized_output_is_refused_unread(suite: SpreadsheetSuite, tmp_path: Path) -> None:
    task, trial_dir = trial(suite, tmp_path)
    with open(trial_dir / "workspace" / OUTPUT, "wb") as f:
        f.truncate(Limits().file_bytes + (1 << 20))  # sparse: no disk used
    score = suite.score(task, trial_dir, None, None)  # type: ignore[arg-type]
    assert (score.reward, score.reason) == (0.0, f"{OUTPUT} is 65 MB, over the 64 MB limit")


def test_a_missing_output(suite: SpreadsheetSuite, tmp_path: Path) -> None:
    task, trial_dir = trial(suite, tmp_path)
    score = suite.score(task, trial_dir, None, None)  # type: ignore[arg-type]
    assert (score.reward, score.reason) == (0.0, f"output file {OUTPUT} not found")


def test_claimed_dimensions_cost_only_the_stored_cells(tmp_path: Path) -> None:
    """A1 and XFD1048576: the rectangle is 17 billion cells; only the two stored ones are compared."""
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": "x"}})
    corner = book(tmp_path / "corner.xlsx", {"S": {"A1": "x", "XFD1048576": 1}})
    assert corner.stat().st_size < 6000
    row = score_case(1, golden, corner, "1:1")
    assert (row.passed, row.checked_cells) == (True, 16384)
    whole = score_case(1, golden, corner, "A:XFD")
    assert (whole.checked_cells, whole.reason) == (16384 * 1048576, "corner.xlsx: S!XFD1048576: expected None, got 1")


def test_a_workbook_unpacking_past_the_limit_is_refused(tmp_path: Path) -> None:
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 1}})
    bomb = tmp_path / "bomb.xlsx"
    with zipfile.ZipFile(golden) as src, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as out:
        for name in src.namelist():
            data = src.read(name)
            if name == "xl/worksheets/sheet1.xml":
                data = data.replace(b"<sheetData>", b"<sheetData>" + b" " * (8 << 20))
            out.writestr(name, data)
    assert bomb.stat().st_size < 100_000
    score = score_cases([(golden, bomb, "output/bomb.xlsx")], "A1", limits=Limits(unzipped_bytes=4 << 20))
    assert (score.reward, score.reason) == (0.0, "output output/bomb.xlsx cannot be opened: unpacks to more than 4 MB")


@pytest.mark.skipif(libreoffice() is None, reason="LibreOffice (soffice) is not installed")
def test_formulas_asking_for_host_files_or_urls_get_nothing(tmp_path: Path) -> None:
    """LibreOffice recalculates the student's formulas on the host: it must fetch no file and no URL."""
    canary = tmp_path / "canary.txt"
    canary.write_text("HOST-CANARY-7741")
    requests: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            requests.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"HOST-CANARY-7741")

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 1}})
        output = book(tmp_path / "out.xlsx", {"S": {
            "A1": f'=_xlfn.WEBSERVICE("http://127.0.0.1:{server.server_port}/x")',
            "A2": f'=_xlfn.WEBSERVICE("file://{canary}")', "A3": f'=DDE("soffice","{canary}","A1")'}})
        score = score_cases([(golden, output, "output/out.xlsx")], "A1:A3", engine="libreoffice")
    finally:
        server.shutdown()
    assert requests == [] and "HOST-CANARY" not in score.model_dump_json()
    assert score.details["cases"][0]["engine"] == "libreoffice"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_libreoffice_runs_sandboxed_with_nothing_of_the_host(tmp_path: Path, monkeypatch) -> None:
    """What recalculation runs sees no host secret, is no host user, and reaches no listener of the host."""
    from unscaffold.benchmarks.spreadsheet.recalc import _run_isolated

    monkeypatch.setenv("OPENAI_API_KEY", "HOST-SECRET-3391")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    work, profile = tmp_path / "work", tmp_path / "lo" / "profile-1"
    work.mkdir()
    profile.mkdir(parents=True)
    probe = (f"env | grep -c SECRET; id -u; ls {tmp_path / 'lo'}; "
             f"(exec 3<>/dev/tcp/127.0.0.1/{listener.getsockname()[1]}) 2>&1 | grep -o -m1 'Connection refused'; "
             "echo done")
    try:
        done = _run_isolated(["bash", "-c", probe], work, [profile], "the probe", 30.0, 1 << 30)
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()
    count, uid, seen, network, end = done.stderr_tail.splitlines()
    assert (count, seen, network, end, done.returncode) == ("0", "profile-1", "Connection refused", "done", 0)
    assert int(uid) >= 1_610_000_000 if os.geteuid() == 0 else int(uid) == os.getuid()  # never the host user as root


# ---- answers that point at other workbooks: the golden, a host file ----

HOST_CANARY = "HOST-CANARY-9c3f-xlsx"


def host_workbook(tmp_path: Path) -> Path:
    """A workbook of the host's, outside any trial, whose every cell of interest holds the canary."""
    return book(tmp_path / "host" / "book.xlsx", {"Sheet1": {f"A{r}": HOST_CANARY for r in range(1, 20)}})


def link_command(suite: SpreadsheetSuite, task_id: str, target: str, damage: bool = False) -> str:
    """The student's command: every answer cell a formula into `target` ({sheet} and {cell} filled in),
    written with openpyxl inside the sandbox; `damage` also drops [Content_Types].xml from the package."""
    cells = suite.built[task_id].answer_cells()
    script = (
        "import openpyxl, zipfile\n"
        f"wb = openpyxl.load_workbook('spreadsheets/{input_name(task_id)}')\n"
        f"for sheet, cell in {cells!r}:\n"
        f"    wb[sheet][cell] = '=' + {target!r}.format(sheet=sheet, cell=cell)\n"
        f"out = 'output/{output_name(task_id)}'\n"
        "wb.save(out)\n"
        + ("parts = {n: zipfile.ZipFile(out).read(n) for n in zipfile.ZipFile(out).namelist()}\n"
           "with zipfile.ZipFile(out, 'w') as z:\n"
           "    [z.writestr(n, d) for n, d in parts.items() if n != '[Content_Types].xml']\n" if damage else ""))
    return f"python3 - <<'PY'\n{script}PY"


ENGINES = ["formulas", pytest.param("libreoffice", marks=pytest.mark.skipif(
    libreoffice() is None, reason="LibreOffice (soffice) is not installed"))]


@needs_bwrap
@pytest.mark.parametrize("engine", ENGINES)
def test_answers_linking_to_the_golden_or_a_host_workbook_score_0_and_never_train(
        tmp_path: Path, write_replay, monkeypatch, engine: str) -> None:
    """The golden-link trick (plain, and with a package LibreOffice refuses) and links to a host workbook by
    absolute and relative path: each scores 0, no engine reads the linked book, no host value reaches any
    file of the run, and `build-sft --keep-all` keeps none of them."""
    from unscaffold.run.models import RunConfig
    from unscaffold.run.runner import run
    from unscaffold.sft.build import build_sft

    monkeypatch.setenv("UNSCAFFOLD_SPREADSHEET_ENGINE", engine)
    suite = SpreadsheetSuite()
    host = host_workbook(tmp_path)
    # from a copy in a scoring folder (TMPDIR/unscaffold-score-*/output-1/) up to the host workbook
    relative = os.path.relpath(host.parent, Path(tempfile.gettempdir()) / "score" / "output-1")
    tricks = {
        "line-totals-1": link_command(suite, "line-totals-1", "'[1_line-totals-1_golden.xlsx]{sheet}'!{cell}"),
        "line-totals-4": link_command(suite, "line-totals-4", "'../gold/[1_line-totals-4_golden.xlsx]{sheet}'!{cell}",
                                      damage=True),
        "staff-codes-1": link_command(suite, "staff-codes-1", f"'{host.parent}/[book.xlsx]Sheet1'!A2"),
        "staff-codes-4": link_command(suite, "staff-codes-4", f"'{relative}/[book.xlsx]Sheet1'!A2"),
    }
    spec = write_replay({task: [call(command), final("done")] for task, command in tricks.items()})
    out = tmp_path / "run"
    summary = run(RunConfig(suite="spreadsheet", student=spec, out=out, task_ids=sorted(tricks)))
    assert summary.per_task == dict.fromkeys(sorted(tricks), 0.0)
    results = {t: json.loads((out / "trials" / t / "result.json").read_text()) for t in tricks}
    golden = results["line-totals-1"]
    assert golden["outcome"] == "failed"
    assert golden["reason"] == (
        "output/1_line-totals-1_output.xlsx: 'Sales 2024'!E2: expected 240.73, got a reference to another "
        "workbook ('[1_line-totals-1_golden.xlsx]Sales 2024'!E2), not followed (and 9 more cells)")
    assert golden["details"]["refused_artifact"] == [
        "output/1_line-totals-1_output.xlsx refers to other workbooks in answer cells ('Sales 2024'!E2: "
        "'[1_line-totals-1_golden.xlsx]Sales 2024'!E2); external references are never followed"]
    assert golden["details"]["cases"][0]["engine"] == "cached"  # no engine ran on it
    assert results["line-totals-4"]["reason"] == (
        "output output/1_line-totals-4_output.xlsx cannot be opened: cannot be read: KeyError: \"There is no "
        "item named '[Content_Types].xml' in the archive\"")
    for task in ("staff-codes-1", "staff-codes-4"):
        assert results[task]["reason"].startswith(f"output/1_{task}_output.xlsx: Staff!D2: expected ")
        assert results[task]["details"]["refused_artifact"][0].startswith(
            f"output/1_{task}_output.xlsx refers to other workbooks in answer cells (Staff!D2: '")
    assert HOST_CANARY not in run_files(out)
    report = build_sft([out], tmp_path / "sft.jsonl", keep_all=True)
    # --keep-all keeps the damaged one (reward 0, nothing linked was read), never a linking one
    assert report.kept == 1 and report.dropped == {"refused_artifact": 3}


def run_files(out: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file() and not p.is_symlink()
                     and p.suffix in (".json", ".jsonl", ".txt", ".html", ".md"))


@pytest.mark.parametrize("engine", ENGINES)
def test_golden_and_output_copy_never_share_a_folder(tmp_path: Path, monkeypatch, engine: str) -> None:
    """The copy of the output sits alone in a folder of its own while scoring, the golden elsewhere, and the
    honest answer still scores 1 with the engine chosen."""
    from unscaffold.benchmarks.spreadsheet import suite as suite_module

    monkeypatch.setenv("UNSCAFFOLD_SPREADSHEET_ENGINE", engine)
    suite = SpreadsheetSuite()
    task, trial_dir = trial(suite, tmp_path)
    workspace = trial_dir / "workspace"
    reference_policy(suite.built[TASK], workspace / "spreadsheets" / input_name(TASK), workspace / OUTPUT)
    seen: list[tuple[Path, list[str], Path]] = []
    real = suite_module.score_cases

    def spy(cases, *args, **kwargs):  # type: ignore[no-untyped-def]
        for golden, copy, _ in cases:
            seen.append((golden, sorted(p.name for p in copy.parent.iterdir()), copy))
        return real(cases, *args, **kwargs)

    monkeypatch.setattr(suite_module, "score_cases", spy)
    score = suite.score(task, trial_dir, None, None)  # type: ignore[arg-type]
    (golden, beside, copy), = seen
    assert beside == [output_name(TASK)] and golden.parent != copy.parent
    assert (score.reward, score.outcome) == (1.0, None)


@pytest.mark.skipif(libreoffice() is None, reason="LibreOffice (soffice) is not installed")
def test_a_package_libreoffice_refuses_is_a_recalculation_failure(tmp_path: Path) -> None:
    """LibreOffice exits 0 and writes nothing: the case fails saying so; no other engine steps in."""
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 2, "A2": 6}})
    made = book(tmp_path / "made.xlsx", {"S": {"A1": 2, "A2": "=A1*3"}})
    damaged = tmp_path / "out.xlsx"
    with zipfile.ZipFile(made) as src, zipfile.ZipFile(damaged, "w") as out:
        for name in src.namelist():
            if name != "_rels/.rels":
                out.writestr(name, src.read(name))
    score = score_cases([(golden, damaged, "output/out.xlsx")], "A1:A2", engine="libreoffice")
    assert (score.reward, score.outcome) == (0.0, None)
    assert score.reason == ("output/out.xlsx: recalculation failed: LibreOffice gave no workbook back from out.xlsx "
                            "(exit 0): Error: source file could not be loaded")
    assert score.details["cases"][0]["recalculation_failed"] is True
    assert score.details["engine"] == "none"


def external_link_book(path: Path, formula: str) -> Path:
    """A workbook as Excel saves a link: the formula in index form and an xl/externalLinks part."""
    book(path, {"S": {"A1": 2, "A2": formula}})
    with zipfile.ZipFile(path) as archive:
        parts = {name: archive.read(name) for name in archive.namelist()}
    parts["xl/externalLinks/externalLink1.xml"] = (
        b'<externalLink xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><externalBook '
        b'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" r:id="rId1">'
        b'<sheetNames><sheetName val="S"/></sheetNames></externalBook></externalLink>')
    parts["xl/externalLinks/_rels/externalLink1.xml.rels"] = (
        b'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship '
        b'Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/externalLinkPath" '
        b'Target="gold.xlsx" TargetMode="External"/></Relationships>')
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return path


@pytest.mark.parametrize("engine", ENGINES)
def test_an_index_form_link_with_its_part_is_wrong_and_refused(tmp_path: Path, engine: str) -> None:
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 2, "A2": 6}})
    output = external_link_book(tmp_path / "out.xlsx", "=[1]S!A2")
    score = score_cases([(golden, output, "output/out.xlsx")], "A1:A2", engine=engine)  # type: ignore[arg-type]
    assert (score.reward, score.outcome) == (0.0, None)
    assert score.reason == ("output/out.xlsx: S!A2: expected 6, got a reference to another workbook ([1]S!A2), "
                            "not followed")
    case = score.details["cases"][0]
    assert case["notes"] == ["out.xlsx was not recalculated: it refers to other workbooks ([1]S!A2 in A2 of "
                             "xl/worksheets/sheet1.xml and 1 more), which are never followed"]
    assert score.details["refused_artifact"] == ["output/out.xlsx refers to other workbooks in answer cells "
                                                 "(S!A2: [1]S!A2); external references are never followed"]


def test_a_link_outside_the_answer_cells_stops_recalculation_but_not_the_answer(tmp_path: Path) -> None:
    """A stale link the input may carry: the workbook is read as saved (no engine), the answer still counts."""
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 2, "A2": 6}})
    output = with_cached(book(tmp_path / "out.xlsx", {"S": {"A1": 2, "A2": 6, "B9": "='[x.xlsx]S'!A1"}}),
                         {"B9": 1})
    row = score_case(1, golden, output, "A1:A2", engine="formulas")
    assert (row.passed, row.engine, row.foreign_references) == (True, "cached", [])
    assert row.notes == ["out.xlsx was not recalculated: it refers to other workbooks ('[x.xlsx]S'!A1 in B9 of "
                         "xl/worksheets/sheet1.xml), which are never followed"]


@needs_bwrap
def test_the_formulas_engine_loads_no_other_book_even_when_told_to(tmp_path: Path) -> None:
    """Past the link check, the engine itself: a copy alone in a sandbox, so a formula naming a host
    workbook by absolute path gets nothing of it."""
    from unscaffold.benchmarks.spreadsheet.recalc import _formulas_engine

    host = host_workbook(tmp_path)
    output = book(tmp_path / "out.xlsx", {"S": {"A1": f"='{host.parent}/[book.xlsx]Sheet1'!A1", "A2": "=1+1"}})
    answer = _formulas_engine(output, [("S", 1, 1), ("S", 2, 1)], "the formulas engine", 60.0, 3 << 30)
    assert HOST_CANARY not in json.dumps(answer)
    assert [v for v in answer["values"] if v[:3] == ["S", 2, 1]] == [["S", 2, 1, 2]]


def test_the_engine_takes_no_cell_of_another_book_for_its_own(tmp_path: Path) -> None:
    """A book a formula names has a sheet of the same name: its cells never stand in for the workbook's."""
    from unscaffold.benchmarks.spreadsheet.reader import evaluate

    book(tmp_path / "other.xlsx", {"S": {"B1": 99}})
    output = book(tmp_path / "out.xlsx", {"S": {"A1": "='[other.xlsx]S'!B1", "B1": "=1+1"}})
    assert evaluate({"path": str(output), "cells": [["S", 1, 2]]}) == {"values": [["S", 1, 2, 2]]}


@pytest.mark.parametrize("formula,reference", [
    ("'[1_x_golden.xlsx]Sales 2024'!E2", "'[1_x_golden.xlsx]Sales 2024'!E2"),
    ("SUM([1]S!A1:B2)", "[1]S!A1:B2"),
    ("'../DIR/[book.xlsx]Sheet1'!A1+1", "'../DIR/[book.xlsx]Sheet1'!A1"),
    ("[1]!Name", "[1]!Name"),
    ("[book.xlsx]Sheet1!$A$1:$B$3", "[book.xlsx]Sheet1!$A$1:$B$3"),
    ("'file:///etc/x.ods'#$Sheet1.A1", "'file:///etc/x.ods'#$Sheet1.A1"),
    ('INDIRECT("[b.xlsx]S!A1")', "[b.xlsx]S!A1"),
    ("SUM(Table1[Col])+Sheet2!A1", None),
    ("Table1[[#This Row],[A]]*2", None),
    ('"[a]b!"&A1', None),
    ('INDIRECT("Table1[Col]")', None),
    ("'It''s'!A1", None),
])
def test_foreign_references_are_found_and_tables_are_not(formula: str, reference: str | None) -> None:
    from unscaffold.benchmarks.spreadsheet.reader import foreign_reference

    assert foreign_reference(formula) == reference


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to nobody needs root")
def test_without_bubblewrap_an_engine_runs_as_nobody_with_nothing_of_the_host(tmp_path: Path, monkeypatch) -> None:
    from unscaffold.benchmarks.spreadsheet import recalc

    real = shutil.which
    monkeypatch.setattr(recalc.shutil, "which",
                        lambda name, path=None: None if name == "bwrap" else real(name, path=path))
    monkeypatch.setenv("OPENAI_API_KEY", "HOST-SECRET-3391")
    work = tmp_path / "work"
    work.mkdir()
    done = recalc._run_isolated(["/bin/sh", "-c", "id -u; env | grep -c SECRET; pwd; touch made"], work, [],
                                "the probe", 30.0, 1 << 30)
    assert done.stdout.decode().split() == ["65534", "0", str(work)]
    assert (work / "made").stat().st_uid == 0  # handed back after the run
    output = book(tmp_path / "out.xlsx", {"S": {"A1": 2, "A2": "=A1*3"}})
    if not recalc.reachable_by_others(Path(sys.executable)):  # e.g. a pyenv Python under a private /root
        with pytest.raises(LimitExceeded) as err:
            recalc._formulas_engine(output, [("S", 2, 1)], "the engine", 60.0, 3 << 30)
        assert str(err.value).startswith(f"the engine cannot run unprivileged: {sys.executable} lies where the "
                                         "unprivileged user cannot reach it; install bubblewrap")
        return
    assert recalc._formulas_engine(output, [("S", 2, 1)], "the engine", 60.0, 3 << 30) == {"values": [["S", 2, 1, 6]]}


def test_a_golden_that_links_elsewhere_is_read_as_saved(tmp_path: Path) -> None:
    """A real golden may carry a link: its cached values count and no engine loads the linked book; a
    linked formula cell without a cached value cannot be judged."""
    golden = with_cached(book(tmp_path / "gold.xlsx", {"S": {"A1": 2, "A2": "='[prices.xlsx]S'!A1"}}), {"A2": 6})
    answer = book(tmp_path / "out.xlsx", {"S": {"A1": 2, "A2": 6}})
    row = score_case(1, golden, answer, "A1:A2", engine="formulas")
    assert (row.passed, row.golden_engine) == (True, "cached")
    assert row.notes == ["gold.xlsx was not recalculated: it refers to other workbooks ('[prices.xlsx]S'!A1 in A2 "
                         "of xl/worksheets/sheet1.xml), which are never followed"]
    bare = book(tmp_path / "bare.xlsx", {"S": {"A1": 2, "A2": "='[prices.xlsx]S'!A1"}})
    unjudged = score_case(1, bare, answer, "A1:A2", engine="formulas")
    assert (unjudged.outcome, unjudged.reason) == (
        "verifier_error", "golden workbook bare.xlsx: 1 formula cell(s) of bare.xlsx in answer_position have no cached "
                          "value (first S!A2) and the workbook refers to other workbooks, so no engine computes them")


def test_an_external_file_target_stops_recalculation_and_a_hyperlink_does_not(tmp_path: Path) -> None:
    """A relationship to a file outside the package (a linked image, an OLE object) could be loaded by an
    engine; a hyperlink is never opened by one."""
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 2, "A2": 6}})
    wb = openpyxl.Workbook()
    wb.active.title = "S"
    wb.active["A1"], wb.active["A2"] = 2, "=A1*3"
    wb.active["B1"].hyperlink = "http://example.com/x"
    wb.save(tmp_path / "hyper.xlsx")
    plain = score_case(1, golden, tmp_path / "hyper.xlsx", "A1:A2", engine="formulas")
    assert (plain.passed, plain.engine, plain.notes) == (True, "formulas", [])
    linked = tmp_path / "linked.xlsx"
    with zipfile.ZipFile(tmp_path / "hyper.xlsx") as src, zipfile.ZipFile(linked, "w") as out:
        for name in src.namelist():
            data = src.read(name)
            if name == "xl/worksheets/_rels/sheet1.xml.rels":
                data = data.replace(b"</Relationships>", b'<Relationship Id="rId9" Type="http://schemas.openxml'
                                    b'formats.org/officeDocument/2006/relationships/image" Target="/srv/x.png" '
                                    b'TargetMode="External"/></Relationships>')
            out.writestr(name, data)
    row = score_case(1, golden, linked, "A1:A2", engine="formulas")
    assert (row.passed, row.engine) == (False, "cached")  # no engine ran, and A2 has no cached value
    assert row.notes == ["linked.xlsx was not recalculated: it refers to other workbooks (an external target "
                         "'/srv/x.png' in xl/worksheets/_rels/sheet1.xml.rels), which are never followed"]
