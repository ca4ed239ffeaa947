"""The official cell-comparison rules, recalculation (which engine scored), and bad outputs scoring 0."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from unscaffold.benchmarks.spreadsheet.recalc import libreoffice, load_values
from unscaffold.benchmarks.spreadsheet.scorer import score_case, score_cases
from unscaffold.benchmarks.spreadsheet.values import normalize, same_value

needs_libreoffice = pytest.mark.skipif(libreoffice() is None, reason="LibreOffice (soffice) is not installed")


def book(path: Path, sheets: dict[str, dict[str, Any]], formats: dict[str, str] | None = None) -> Path:
    """A workbook from {sheet: {cell: value}}; `formats` sets number formats by cell (first sheet)."""
    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for name, cells in sheets.items():
        ws = wb.create_sheet(name)
        for coord, value in cells.items():
            ws[coord] = value
    for coord, number_format in (formats or {}).items():
        wb.worksheets[0][coord].number_format = number_format
    wb.save(path)
    return path


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


@pytest.mark.parametrize("engine", ["formulas", pytest.param("libreoffice", marks=needs_libreoffice)])
def test_formulas_are_recalculated(tmp_path: Path, engine: str) -> None:
    golden = book(tmp_path / "gold.xlsx", {"Budget": {"A1": 2, "A2": 3.333, "A3": 5.33, "B1": dt.datetime(2024, 2, 1)}})
    output = book(tmp_path / "out.xlsx", {"Budget": {"A1": 2, "A2": 3.333, "A3": "=SUM(A1:A2)",
                                                     "B1": dt.datetime(2024, 1, 1), "B2": "=B1+31"}},
                  formats={"B2": "yyyy-mm-dd"})
    result = score_case(1, golden, output, "A1:A3", engine=engine)  # type: ignore[arg-type]
    assert (result.passed, result.engine, result.golden_engine) == (True, engine, "none")
    values = load_values(output, engine=engine)  # type: ignore[arg-type]
    assert values.engine == engine
    assert values.sheet("budget").value(2, 2) == dt.datetime(2024, 2, 1)  # date format kept on computed cells
    wrong = book(tmp_path / "wrong.xlsx", {"Budget": {"A1": 2, "A2": 3.333, "A3": "=A1*A2"}})
    failed = score_case(1, golden, wrong, "A1:A3", engine=engine)  # type: ignore[arg-type]
    assert failed.reason == "wrong.xlsx: Budget!A3: expected 5.33, got 6.666"


def test_formula_error_values_fail(tmp_path: Path) -> None:
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 0, "A2": 1}})
    output = book(tmp_path / "out.xlsx", {"S": {"A1": 0, "A2": "=1/A1"}})
    result = score_case(1, golden, output, "A1:A2", engine="formulas")
    assert result.reason == "out.xlsx: S!A2: expected 1, got '#DIV/0!'"


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
        assert (score.reward, score.reason) == (0.0, reason)
        assert score.details["cases"][0]["passed"] is False


def test_bad_position_missing_sheet_and_bad_golden(tmp_path: Path) -> None:
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 1}})
    output = book(tmp_path / "out.xlsx", {"T": {"A1": 1}})
    assert score_case(1, golden, output, "S!A1").reason == "worksheet 'S' not found in the output (it has ['T'])"
    assert score_case(1, golden, golden, "Nope!A1").reason == (
        "sheet 'Nope' of answer_position is not in the golden workbook (it has ['S'])")
    assert score_case(1, golden, golden, "A1:2B").reason == (
        "answer_position 'A1:2B' cannot be parsed: 'A1:2B' is not a cell range")
    broken = tmp_path / "broken.xlsx"
    broken.write_text("x")
    assert score_case(1, broken, golden, "A1").reason == (
        "the golden workbook cannot be used: broken.xlsx is not an xlsx workbook (not a zip archive)")


def test_sheet_names_match_like_excel(tmp_path: Path) -> None:
    golden = book(tmp_path / "gold.xlsx", {"Price List": {"A1": 1}})
    output = book(tmp_path / "out.xlsx", {"price  list": {"A1": 1}})
    assert score_case(1, golden, output, "'PRICE LIST'!A1").passed


def test_several_cases_pass_only_together(tmp_path: Path) -> None:
    golden = book(tmp_path / "gold.xlsx", {"S": {"A1": 1}})
    good = book(tmp_path / "good.xlsx", {"S": {"A1": 1}})
    bad = book(tmp_path / "bad.xlsx", {"S": {"A1": 2}})
    score = score_cases([(golden, good, "1.xlsx"), (golden, bad, "2.xlsx"), (golden, good, "3.xlsx")], "A1")
    assert score.reward == 0.0 and score.details["soft"] == pytest.approx(2 / 3)
    assert score.reason == "2.xlsx: S!A1: expected 1, got 2"
    assert [c["passed"] for c in score.details["cases"]] == [True, False, True]
    assert score.details["engine"] == "none"


def test_python_engine_when_libreoffice_is_missing_or_fails(tmp_path: Path, monkeypatch) -> None:
    from unscaffold.benchmarks.spreadsheet import recalc

    monkeypatch.delenv(recalc.ENGINE_ENV, raising=False)
    output = book(tmp_path / "out.xlsx", {"S": {"A1": 2, "A2": "=A1*3"}})
    monkeypatch.setattr(recalc, "libreoffice", lambda: None)
    values = recalc.load_values(output, engine="libreoffice")
    assert (values.engine, values.notes) == ("formulas", ["LibreOffice is not installed; used the formulas engine"])
    assert recalc.load_values(output).engine == "formulas"  # auto
    monkeypatch.setattr(recalc, "libreoffice", lambda: "/usr/bin/soffice")

    def broken(office: str, paths: list[Path]) -> list[Path]:
        raise recalc.WorkbookError("conversion failed (exit 1, missing ['book0.xlsx']): crash")

    monkeypatch.setattr(recalc, "_libreoffice_convert", broken)
    values = recalc.load_values(output)
    assert values.engine == "formulas" and values.sheet("S").value(2, 1) == 6
    assert values.notes == ["LibreOffice failed (WorkbookError: conversion failed (exit 1, missing ['book0.xlsx']): "
                            "crash); used the formulas engine"]
    monkeypatch.setenv(recalc.ENGINE_ENV, "excel")
    with pytest.raises(ValueError, match="unknown engine 'excel'"):
        recalc.load_values(output)
