"""The official cell-comparison rules, recalculation (which engine scored, cached values kept), the
limits on each step, and bad outputs scoring 0."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from openpyxl.worksheet.formula import ArrayFormula

from tests.spreadsheet_books import book, with_cached
from unscaffold.benchmarks.spreadsheet import recalc
from unscaffold.benchmarks.spreadsheet.recalc import Limits, libreoffice, load_values
from unscaffold.benchmarks.spreadsheet.scorer import score_case, score_cases
from unscaffold.benchmarks.spreadsheet.values import normalize, same_value

needs_libreoffice = pytest.mark.skipif(libreoffice() is None, reason="LibreOffice (soffice) is not installed")
ENGINES = ["formulas", pytest.param("libreoffice", marks=needs_libreoffice)]


@pytest.mark.parametrize(
    "expected,actual,same",
    [
        (3.14159, 3.14, True),  # numbers rounded to 2 places
        (0.1 + 0.2, 0.3, True),
        (2.5, 2.51, False),
        (12, "12.00", True),  # numeric strings count as numbers
        ("12.5", 12.499, True),
        (" 7 ", 7, True),
        (dt.datetime(2024, 3, 5), 45356, True),  # dates as serial numbers
        (dt.datetime(2024, 3, 5), 45357, False),
        (dt.date(2024, 3, 5), dt.datetime(2024, 3, 5), True),
        (dt.time(14, 30, 15), "14:30", True),
        ("", None, True),  # "" equals an empty cell
        (None, "", True),
        (None, None, True),
        ("x", None, False),
        (None, 0, False),
        ("12a", 12, False),  # type mismatch
        ("TRUE", True, False),
        (True, 1, True),  # booleans are numbers, as in the official code
        ("nan", float("nan"), False),  # not numbers to a spreadsheet, whatever float() says
        ("1_000", 1000, False),
        ("J.SMITH", "J.Smith", False),  # text compares exactly
    ],
)
def test_value_rules(expected: Any, actual: Any, same: bool) -> None:
    assert same_value(expected, actual) is same


def test_normalize_forms() -> None:
    assert normalize(dt.datetime(1900, 3, 1, 6)) == 61.0  # whole days, rounded as the official code does
    assert normalize(dt.datetime(1900, 3, 1, 18)) == 62.0
    assert normalize(dt.timedelta(hours=36)) == 1.5
    assert normalize("  3.456 ") == 3.46


def test_rounding_dates_empty_and_sheet_default(tmp_path: Path) -> None:
    golden = book(tmp_path / "gold.xlsx", {"Data": {"A1": 10.126, "B1": dt.datetime(2024, 1, 31), "C1": None},
                                           "Other": {"A1": "elsewhere"}})
    output = book(tmp_path / "out.xlsx", {"Other": {"A1": "moved first"},
                                          "Data": {"A1": 10.13, "B1": 45322, "C1": ""}})
    result = score_case(1, golden, output, "A1:C1")  # no sheet: the golden's first sheet, Data
    assert (result.passed, result.reason, result.checked_cells) == (True, None, 3)
    assert result.engine == "none" and result.golden_engine == "none"


def test_mismatch_reason_lists_cells(tmp_path: Path) -> None:
    golden = book(tmp_path / "gold.xlsx", {"Bob's, Data": {"A1": 1, "A2": "two", "A3": 3}})
    output = book(tmp_path / "out.xlsx", {"Bob's, Data": {"A1": 1, "A2": 2, "A3": "3"}})
    result = score_case(1, golden, output, "'Bob''s, Data'!A1:A3", output_label="output/1_t_output.xlsx")
    assert not result.passed
    assert result.reason == "output/1_t_output.xlsx: 'Bob''s, Data'!A2: expected 'two', got 2"
    assert result.mismatch_count == 1


def test_column_only_range_uses_both_sheets_rows(tmp_path: Path) -> None:
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": "h", "A2": 1}})
    output = book(tmp_path / "out.xlsx", {"S": {"A1": "h", "A2": 1, "A5": "extra"}})
    result = score_case(1, golden, output, "A:A")
    assert result.checked_cells == 5 and result.reason == "out.xlsx: S!A5: expected None, got 'extra'"


@pytest.mark.parametrize("engine", ENGINES)
def test_formulas_are_recalculated(tmp_path: Path, engine: str) -> None:
    golden = book(tmp_path / "gold.xlsx", {"Budget": {"A1": 2, "A2": 3.333, "A3": 5.33, "B1": dt.datetime(2024, 2, 1)}})
    output = book(tmp_path / "out.xlsx", {"Budget": {"A1": 2, "A2": 3.333, "A3": "=SUM(A1:A2)",
                                                     "B1": dt.datetime(2024, 1, 1), "B2": "=B1+31"}},
                  formats={"B2": "yyyy-mm-dd"})
    result = score_case(1, golden, output, "A1:A3", engine=engine)  # type: ignore[arg-type]
    assert (result.passed, result.engine, result.golden_engine) == (True, engine, "none")
    values = load_values(output, position="A1:B2", engine=engine)  # type: ignore[arg-type]
    assert values.engine == engine
    assert values.sheet("Budget").value(2, 2) == dt.datetime(2024, 2, 1)  # date format kept on computed cells
    wrong = book(tmp_path / "wrong.xlsx", {"Budget": {"A1": 2, "A2": 3.333, "A3": "=A1*A2"}})
    failed = score_case(1, golden, wrong, "A1:A3", engine=engine)  # type: ignore[arg-type]
    assert failed.reason == "wrong.xlsx: Budget!A3: expected 5.33, got 6.666"


def test_formula_error_values_fail(tmp_path: Path) -> None:
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 0, "A2": 1}})
    output = book(tmp_path / "out.xlsx", {"S": {"A1": 0, "A2": "=1/A1"}})
    result = score_case(1, golden, output, "A1:A2", engine="formulas")
    assert result.reason == "out.xlsx: S!A2: expected 1, got '#DIV/0!'"
    assert result.notes == ["the formulas engine gave error values (S!A2=#DIV/0!); it lacks some Excel functions"]


def excel_saved_golden(tmp_path: Path) -> Path:
    """An array formula and a HYPERLINK, with the values Excel cached (the `formulas` engine gives 0-like
    or #NAME? results for such cells)."""
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 2, "A2": 5, "B1": ArrayFormula("B1", "=SUM(A1:A2*A1:A2)"),
                                                 "B2": '=HYPERLINK("http://example.com","link")'}})
    return with_cached(golden, {"B1": 29, "B2": "link"})


@pytest.mark.parametrize("engine", ENGINES)
def test_cached_golden_values_are_kept(tmp_path: Path, engine: str) -> None:
    """Values-only answers pass; the unchanged input (empty answer cells) fails, whichever engine scores."""
    golden = excel_saved_golden(tmp_path)
    answer = book(tmp_path / "answer.xlsx", {"S": {"A1": 2, "A2": 5, "B1": 29, "B2": "link"}})
    unchanged = book(tmp_path / "input.xlsx", {"S": {"A1": 2, "A2": 5}})
    passed = score_case(1, golden, answer, "B1:B2", engine=engine)  # type: ignore[arg-type]
    assert (passed.passed, passed.golden_engine, passed.engine) == (True, engine.replace("formulas", "cached"), "none")
    failed = score_case(1, golden, unchanged, "B1:B2", engine=engine)  # type: ignore[arg-type]
    assert failed.reason == "input.xlsx: S!B1: expected 29, got None (and 1 more cells)"
    copy = score_case(1, golden, golden, "B1:B2", engine=engine)  # type: ignore[arg-type]
    assert copy.passed  # the oracle's copy of the golden


def test_an_engine_failure_is_a_recalculation_failure_never_another_engine(tmp_path: Path, monkeypatch) -> None:
    """LibreOffice failing on an output fails the case with a reason that says so (the file's fault); on a
    golden the case cannot be judged. No other engine steps in."""
    golden = excel_saved_golden(tmp_path)
    output = book(tmp_path / "out.xlsx", {"S": {"A1": 2, "A2": 5, "B1": "=SUM(A1:A2)", "B2": "link"}})
    monkeypatch.setattr(recalc, "libreoffice", lambda: "/nonexistent/soffice")
    # LibreOffice runs in a local sandbox where bubblewrap is at hand (the shell there reports the missing
    # program), else as a bounded child (whose wrapper does)
    missing = ("bash: line 1: /nonexistent/soffice: No such file or directory" if shutil.which("bwrap") else
               "FileNotFoundError: [Errno 2] No such file or directory")
    exit_code = 127 if shutil.which("bwrap") else 1
    with pytest.raises(recalc.RecalculationFailed) as failed:
        load_values(golden, position="B1:B2")
    assert str(failed.value) == f"LibreOffice failed on gold.xlsx (exit {exit_code}): {missing}"
    score = score_cases([(golden, output, "output/out.xlsx")], "B1:B2")
    assert (score.reward, score.outcome) == (0.0, "verifier_error")
    assert score.reason == f"golden workbook gold.xlsx: LibreOffice failed on gold.xlsx (exit {exit_code}): {missing}"
    plain = book(tmp_path / "plain.xlsx", {"S": {"A1": 2, "A2": 5, "B1": 29, "B2": "link"}})
    monkeypatch.setattr(recalc, "libreoffice", lambda: "/nonexistent/soffice")
    case = score_case(1, plain, output, "B1:B2")  # a golden without formulas needs no engine
    assert (case.passed, case.outcome, case.recalculation_failed) == (False, None, True)
    assert case.reason == (f"out.xlsx: recalculation failed: LibreOffice failed on out.xlsx (exit {exit_code}): "
                           f"{missing}")
    assert (case.engine, case.notes) == ("none", [])


def test_a_recalculation_past_its_limit_is_a_verifier_error(tmp_path: Path) -> None:
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 2, "A2": 6}})
    output = book(tmp_path / "out.xlsx", {"S": {"A1": 2, "A2": "=A1*3"}})
    score = score_cases([(golden, output, "output/out.xlsx")], "A1:A2", engine="formulas",
                        limits=Limits(formulas_s=0.05))
    assert (score.reward, score.outcome) == (0.0, "verifier_error")
    assert score.reason == (
        "output/out.xlsx: 1 formula cell(s) of out.xlsx in answer_position have no cached value and could not be "
        "computed: the formulas engine on out.xlsx ran past its 0.05 s time limit and was stopped")


def test_a_read_past_its_limit_stops_the_reader_and_the_next_one_starts_afresh(tmp_path: Path) -> None:
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 1}})
    # a nanosecond: no reader can answer within it, warm or cold, on a quiet machine or a busy one
    score = score_cases([(golden, golden, "output/o.xlsx")], "A1", limits=Limits(read_s=1e-9))
    assert (score.reward, score.outcome) == (0.0, "verifier_error")
    assert score.reason == ("golden workbook gold.xlsx: reading gold.xlsx ran past its 1e-09 s time limit and was "
                            "stopped")
    assert score_cases([(golden, golden, "output/o.xlsx")], "A1").reward == 1.0


def test_a_case_past_its_total_limit_is_a_verifier_error(tmp_path: Path) -> None:
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 1}})
    score = score_cases([(golden, golden, "output/o.xlsx")], "A1", limits=Limits(case_s=0.2))
    assert (score.reward, score.outcome) == (0.0, "verifier_error")
    assert score.reason == "golden workbook gold.xlsx: scoring ran past the case's 0.2 s limit before reading gold.xlsx"


def test_memory_limit_is_a_verifier_error(tmp_path: Path) -> None:
    """The golden fits in 64 MB; an output of 100,000 filled cells does not."""
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 1}})
    wb = openpyxl.Workbook()
    wb.active.title = "S"
    for row in range(1, 50001):
        wb.active.append([f"text {row}", row * 1.5])
    wb.save(tmp_path / "big.xlsx")
    score = score_cases([(golden, tmp_path / "big.xlsx", "output/big.xlsx")], "A:B",
                        limits=Limits(memory_bytes=64 << 20))
    assert (score.reward, score.outcome) == (0.0, "verifier_error")
    assert score.reason == "output/big.xlsx: reading big.xlsx ran past its 64 MB memory limit"


@needs_libreoffice
def test_libreoffice_past_its_limit_is_a_verifier_error_with_no_other_engine(tmp_path: Path) -> None:
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 2, "A2": 6}})
    output = book(tmp_path / "out.xlsx", {"S": {"A1": 2, "A2": "=A1*3"}})
    score = score_cases([(golden, output, "output/out.xlsx")], "A2", engine="libreoffice",
                        limits=Limits(libreoffice_s=0.05))
    assert (score.reward, score.outcome) == (0.0, "verifier_error")
    assert score.reason == ("output/out.xlsx: LibreOffice converting out.xlsx ran past its 0.05 s time limit and "
                            "was stopped")
    assert "formulas" not in score.details["engine"]


def test_missing_corrupt_and_unreadable_outputs_score_zero(tmp_path: Path) -> None:
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 1}})
    corrupt = tmp_path / "corrupt.xlsx"
    corrupt.write_text("not a workbook")
    truncated = tmp_path / "truncated.xlsx"
    truncated.write_bytes(golden.read_bytes()[:200])
    cases = {
        tmp_path / "missing.xlsx": "output file out/missing.xlsx not found",
        corrupt: "output out/corrupt.xlsx cannot be opened: is not an xlsx workbook (not a zip archive)",
        truncated: "output out/truncated.xlsx cannot be opened: is not an xlsx workbook (not a zip archive)",
    }
    for path, reason in cases.items():
        score = score_cases([(golden, path, f"out/{path.name}")], "A1")
        assert (score.reward, score.reason, score.outcome) == (0.0, reason, None)
        assert score.details["cases"][0]["passed"] is False


def test_bad_position_missing_sheet_and_bad_golden(tmp_path: Path) -> None:
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 1}})
    output = book(tmp_path / "out.xlsx", {"T": {"A1": 1}})
    assert score_case(1, golden, output, "S!A1").reason == "worksheet 'S' not found in the output (it has ['T'])"
    nope = score_case(1, golden, golden, "Nope!A1")
    assert (nope.outcome, nope.reason) == (
        "verifier_error", "golden workbook gold.xlsx: sheet 'Nope' of answer_position is not in the golden workbook "
                          "(it has ['S'])")
    assert score_case(1, golden, golden, "A1:2B").reason == (
        "golden workbook gold.xlsx: answer_position 'A1:2B' cannot be parsed: 'A1:2B' is not a cell range")
    broken = tmp_path / "broken.xlsx"
    broken.write_text("x")
    bad = score_case(1, broken, golden, "A1")
    assert (bad.outcome, bad.reason) == (
        "verifier_error", "the golden workbook cannot be used: broken.xlsx is not an xlsx workbook (not a zip archive)")


def test_sheet_names_match_like_excel_in_the_position_but_exactly_in_the_output(tmp_path: Path) -> None:
    golden = book(tmp_path / "gold.xlsx", {"Price List": {"A1": 1}})
    assert score_case(1, golden, golden, "'PRICE LIST'!A1").passed
    renamed = book(tmp_path / "out.xlsx", {"price  list": {"A1": 1}})
    assert score_case(1, golden, renamed, "'Price List'!A1").reason == (
        "worksheet 'Price List' not found in the output (it has ['price  list'])")  # as the official code


def test_several_cases_pass_only_together(tmp_path: Path) -> None:
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 1}})
    good = book(tmp_path / "good.xlsx", {"S": {"A1": 1}})
    bad = book(tmp_path / "bad.xlsx", {"S": {"A1": 2}})
    score = score_cases([(golden, good, "1.xlsx"), (golden, bad, "2.xlsx"), (golden, good, "3.xlsx")], "A1")
    assert score.reward == 0.0 and score.details["soft"] == pytest.approx(2 / 3)
    assert score.reason == "2.xlsx: S!A1: expected 1, got 2"
    assert [c["passed"] for c in score.details["cases"]] == [True, False, True]
    assert score.details["engine"] == "none" and score.outcome is None


def test_the_engine_is_chosen_once_and_never_replaced(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(recalc.ENGINE_ENV, raising=False)
    output = book(tmp_path / "out.xlsx", {"S": {"A1": 2, "A2": "=A1*3"}})
    monkeypatch.setattr(recalc, "libreoffice", lambda: None)
    with pytest.raises(recalc.ScoringError) as missing:
        recalc.load_values(output, position="A2", engine="libreoffice")
    assert str(missing.value) == "the libreoffice engine was chosen but LibreOffice (soffice) is not installed"
    assert recalc.load_values(output, position="A2").engine == "formulas"  # auto
    assert recalc.engine_summary() == "formulas (LibreOffice is not installed); cached values first"
    assert recalc.engine_summary("libreoffice") == (
        "libreoffice (chosen, not installed: workbooks with formulas cannot be scored)")
    monkeypatch.setattr(recalc, "libreoffice", lambda: "/usr/bin/soffice")
    assert recalc.engine_summary() == (
        "libreoffice (/usr/bin/soffice); a workbook it cannot convert fails with a recalculation failure")
    monkeypatch.setenv(recalc.ENGINE_ENV, "formulas")
    assert recalc.engine_summary() == "formulas (chosen by $UNSCAFFOLD_SPREADSHEET_ENGINE); cached values first"
    monkeypatch.setenv(recalc.ENGINE_ENV, "excel")
    with pytest.raises(ValueError, match="unknown engine 'excel'"):
        recalc.load_values(output, position="A2")
