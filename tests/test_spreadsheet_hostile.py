"""A hostile student's output: links, FIFOs, huge claims and huge files score 0 with the reason, never
read a host file, never hang and never allocate what the workbook merely claims. Gold answers never
exist in the trial folder, not even while scoring."""

from __future__ import annotations

import http.server
import os
import shutil
import socket
import threading
import zipfile
from pathlib import Path

import pytest

from tests.spreadsheet_books import book
from unscaffold.benchmarks.base import Task
from unscaffold.benchmarks.spreadsheet import tasks as builtin
from unscaffold.benchmarks.spreadsheet.measure import reference_policy
from unscaffold.benchmarks.spreadsheet.recalc import Limits, libreoffice
from unscaffold.benchmarks.spreadsheet.scorer import score_case, score_cases
from unscaffold.benchmarks.spreadsheet.suite import SpreadsheetSuite, input_name, output_name

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
