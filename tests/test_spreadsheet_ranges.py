"""answer_position parsing: each quirk of real SpreadsheetBench positions, with the exact parse."""

from __future__ import annotations

import pytest

from unscaffold.benchmarks.spreadsheet.ranges import CellRange, RangeError, parse_answer_position


@pytest.mark.parametrize(
    "text,expected",
    [
        ("H3:H5", [CellRange(None, 8, 3, 8, 5)]),
        ("C7", [CellRange(None, 3, 7, 3, 7)]),
        ("Sheet1!A1:B5", [CellRange("Sheet1", 1, 1, 2, 5)]),
        ("'Sheet name'!A1:B5", [CellRange("Sheet name", 1, 1, 2, 5)]),
        # several ranges, with and without stray spaces (also non-breaking ones) after the commas
        ("A1:A5,C1:C5", [CellRange(None, 1, 1, 1, 5), CellRange(None, 3, 1, 3, 5)]),
        ("H3:H5, I3:I5", [CellRange(None, 8, 3, 8, 5), CellRange(None, 9, 3, 9, 5)]),
        ("\u00a0H3:H5,\u00a0I3:I5 ", [CellRange(None, 8, 3, 8, 5), CellRange(None, 9, 3, 9, 5)]),
        # commas and quotes inside quoted sheet names
        ("'b2b, sez, de'!A5:V10", [CellRange("b2b, sez, de", 1, 5, 22, 10)]),
        ("'Bob''s Data'!C2:C8", [CellRange("Bob's Data", 3, 2, 3, 8)]),
        ("'Region ''A'' & ''B'''!C2:C5,'Q1, Q2'!A1",
         [CellRange("Region 'A' & 'B'", 3, 2, 3, 5), CellRange("Q1, Q2", 1, 1, 1, 1)]),
        ("'Sheet1'!A1:B2, 'Price List'!D2:D9", [CellRange("Sheet1", 1, 1, 2, 2), CellRange("Price List", 4, 2, 4, 9)]),
        # an unquoted name with commas is recovered from the part that carries the `!`
        ("b2b, sez, de!A5:V10", [CellRange("b2b, sez, de", 1, 5, 22, 10)]),
        # column-only and row-only ranges leave the other bound open
        ("A:G", [CellRange(None, 1, None, 7, None)]),
        ("Data!B:B", [CellRange("Data", 2, None, 2, None)]),
        ("2:4", [CellRange(None, None, 2, None, 4)]),
        # a missing end column means the start column; a missing end row runs to the last used row
        ("BD2:308", [CellRange(None, 56, 2, 56, 308)]),
        ("A2:C", [CellRange(None, 1, 2, 3, None)]),
        # anchors, lower case, reversed corners, spaces inside the reference
        ("$a$1:$b$3", [CellRange(None, 1, 1, 2, 3)]),
        ("B5:A1", [CellRange(None, 1, 1, 2, 5)]),
        (" Sheet1 ! A1 : B2 ", [CellRange("Sheet1", 1, 1, 2, 2)]),
        ("'Sheet1'!'A1:B2'", [CellRange("Sheet1", 1, 1, 2, 2)]),
    ],
)
def test_parse(text: str, expected: list[CellRange]) -> None:
    assert parse_answer_position(text) == expected


def test_normalised_text_round_trips() -> None:
    ranges = parse_answer_position("'Bob''s Data'!$c$2:c8, A:G,BD2:308, 'Q1, Q2'!A1")
    assert [str(r) for r in ranges] == ["'Bob''s Data'!C2:C8", "A:G", "BD2:BD308", "'Q1, Q2'!A1"]
    assert [parse_answer_position(str(r))[0] for r in ranges] == ranges


def test_open_bounds_close_on_the_sheet_size() -> None:
    column = parse_answer_position("B:C")[0]
    assert column.cells(max_row=3, max_col=9) == [(1, 2), (1, 3), (2, 2), (2, 3), (3, 2), (3, 3)]
    rows = parse_answer_position("2:2")[0]
    assert rows.cells(max_row=5, max_col=3) == [(2, 1), (2, 2), (2, 3)]
    tail = parse_answer_position("A4:A")[0]
    assert tail.cells(max_row=2, max_col=1) == [(4, 1)]  # never an empty range (the BD2:308 vacuous pass)


@pytest.mark.parametrize(
    "text,message",
    [
        ("", "'' names no cells"),
        (" , ", "' , ' names no cells"),
        ("A1:2B", "'A1:2B' is not a cell range"),
        ("Total", "'Total' is not a cell range"),
        ("A:3", "'A:3' mixes a column range with a row range"),
        ("XFE1", "'XFE1' lies outside the sheet"),
        ("'Sheet1!A1", "unbalanced quote in \"'Sheet1!A1\""),
        ("''!A1", "\"''!A1\" has an empty sheet name"),
    ],
)
def test_errors_name_the_part(text: str, message: str) -> None:
    with pytest.raises(RangeError) as err:
        parse_answer_position(text)
    assert str(err.value) == message
