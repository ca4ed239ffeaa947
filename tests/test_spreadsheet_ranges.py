"""answer_position parsing: the official evaluator's reading of each real quirk class (expected sheet
and cells written by hand from its split-on-`,`, split-on-`!`, strip-quotes rules), and Excel's
reading where the official one crashes or reads cells the text does not mean."""

from __future__ import annotations

import pytest

from tests.helpers import message_of
from unscaffold.benchmarks.spreadsheet.ranges import CellRange, RangeError, official_ranges, parse_answer_position


@pytest.mark.parametrize(
    "text,sheets,expected",
    [
        # plain forms
        ("H3:H5", ["Data"], [CellRange(None, 8, 3, 8, 5)]),
        ("C7", ["Data"], [CellRange(None, 3, 7, 3, 7)]),
        ("$c$7", ["Data"], [CellRange(None, 3, 7, 3, 7)]),  # a lone cell goes through openpyxl, which allows both
        ("Sheet1!A1:B5", ["Sheet1"], [CellRange("Sheet1", 1, 1, 2, 5)]),
        ("'Sheet name'!A1:B5", ["Sheet name"], [CellRange("Sheet name", 1, 1, 2, 5)]),
        ("A1:A5,C1:C5", ["S"], [CellRange(None, 1, 1, 1, 5), CellRange(None, 3, 1, 3, 5)]),
        # quirks of real positions: every leading and trailing quote is stripped, inner ones are kept
        ("'Sheet1!'A2:B19", ["Sheet1"], [CellRange("Sheet1", 1, 2, 2, 19)]),
        ("Updated Data'!B5:B9", ["Updated Data"], [CellRange("Updated Data", 2, 5, 2, 9)]),
        ("Sheet1'!A1:M237", ["Sheet1"], [CellRange("Sheet1", 1, 1, 13, 237)]),
        ("'Sub CO's'!B4:B11", ["Sub CO's"], [CellRange("Sub CO's", 2, 4, 2, 11)]),
        ("'Sheet2'!'B7:C22", ["Sheet2"], [CellRange("Sheet2", 2, 7, 3, 22)]),
        ("'99250!A1:F9','99250!H2:H9'", ["99250"], [CellRange("99250", 1, 1, 6, 9), CellRange("99250", 8, 2, 8, 9)]),
        ("MINUS'!B2:E11,'PLUS'!B2:E5200", ["PLUS", "MINUS"],
         [CellRange("MINUS", 2, 2, 5, 11), CellRange("PLUS", 2, 2, 5, 5200)]),
        ("'Sheet1'!'A1:B2'", ["Sheet1"], [CellRange("Sheet1", 1, 1, 2, 2)]),
        # where the official reading names a sheet the golden lacks, or crashes, Excel's reading:
        # commas and doubled quotes inside quoted sheet names
        ("'b2b, sez, de'!A5:V10", ["b2b, sez, de"], [CellRange("b2b, sez, de", 1, 5, 22, 10)]),
        ("'Bob''s Data'!C2:C8", ["Bob's Data"], [CellRange("Bob's Data", 3, 2, 3, 8)]),
        ("'Region ''A'' & ''B'''!C2:C5,'Q1, Q2'!A1", ["Region 'A' & 'B'", "Q1, Q2"],
         [CellRange("Region 'A' & 'B'", 3, 2, 3, 5), CellRange("Q1, Q2", 1, 1, 1, 1)]),
        ("'Sheet1'!A1:B2, 'Price List'!D2:D9", ["Sheet1", "Price List"],
         [CellRange("Sheet1", 1, 1, 2, 2), CellRange("Price List", 4, 2, 4, 9)]),
        ("b2b, sez, de!A5:V10", ["b2b, sez, de"], [CellRange("b2b, sez, de", 1, 5, 22, 10)]),
        # stray (also non-breaking) spaces after the commas
        ("H3:H5, I3:I5", ["S"], [CellRange(None, 8, 3, 8, 5), CellRange(None, 9, 3, 9, 5)]),
        ("\u00a0H3:H5,\u00a0I3:I5 ", ["S"], [CellRange(None, 8, 3, 8, 5), CellRange(None, 9, 3, 9, 5)]),
        # column-only and row-only ranges leave the other bound open
        ("A:G", ["S"], [CellRange(None, 1, None, 7, None)]),
        ("Data!B:B", ["Data"], [CellRange("Data", 2, None, 2, None)]),
        ("2:4", ["S"], [CellRange(None, None, 2, None, 4)]),
        # a missing end column means the start column; a missing end row runs to the last used row
        ("BD2:308", ["S"], [CellRange(None, 56, 2, 56, 308)]),
        ("A2:C", ["S"], [CellRange(None, 1, 2, 3, None)]),
        # anchors and lower case in a range, reversed corners, spaces inside the reference
        ("$a$1:$b$3", ["S"], [CellRange(None, 1, 1, 2, 3)]),
        ("a1:b3", ["S"], [CellRange(None, 1, 1, 2, 3)]),
        ("B5:A1", ["S"], [CellRange(None, 1, 1, 2, 5)]),
        (" Sheet1 ! A1 : B2 ", ["Sheet1"], [CellRange("Sheet1", 1, 1, 2, 2)]),
    ],
)
def test_parse(text: str, sheets: list[str], expected: list[CellRange]) -> None:
    assert parse_answer_position(text, sheets) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("'Sub CO's'!B4:B11", [CellRange("Sub CO's", 2, 4, 2, 11)]),
        ("'Bob''s Data'!C2:C8", [CellRange("Bob''s Data", 3, 2, 3, 8)]),  # kept verbatim: no such sheet
        ("'Q1, Q2'!A1", [CellRange(None, 17, 1, 17, 1), CellRange(" Q2", 1, 1, 1, 1)]),  # Q1 on the first sheet
        ("A1:B2,Sheet1!C3", [CellRange(None, 1, 1, 2, 2), CellRange("Sheet1", 3, 3, 3, 3)]),
        ("A:G", None),  # int('') raises
        ("a1:b3", None),  # lower-case letters count from 'A' as 33: it would read AG1:AH3
        ("B5:A1", None),  # reads no cell: every output would pass
        ("BD2:308", None),
        ("A1:B2 ", None),  # the space counts as a column letter
        ("S!A1!B2", None),
        ("'Sheet1'!A1, B2", None),
    ],
)
def test_official_reading(text: str, expected: list[CellRange] | None) -> None:
    assert official_ranges(text) == expected


def test_official_reading_needs_the_sheets_to_exist() -> None:
    """Without the golden's sheet names the official reading stands; with them, only if it names them."""
    assert parse_answer_position("'Bob''s Data'!C2:C8") == [CellRange("Bob''s Data", 3, 2, 3, 8)]
    assert parse_answer_position("'Bob''s Data'!C2:C8", ["Bob's Data"]) == [CellRange("Bob's Data", 3, 2, 3, 8)]
    # Excel's reading fails on the stray quote, so the official one stays and the scorer names the sheet
    assert parse_answer_position("Updated data'!B5:B9", ["Updated Data"]) == [CellRange("Updated data", 2, 5, 2, 9)]


def test_normalised_text_round_trips() -> None:
    sheets = ["Bob's Data", "Q1, Q2"]
    ranges = parse_answer_position("'Bob''s Data'!$c$2:c8, A:G,BD2:308, 'Q1, Q2'!A1", sheets)
    assert [str(r) for r in ranges] == ["'Bob''s Data'!C2:C8", "A:G", "BD2:BD308", "'Q1, Q2'!A1"]
    assert [parse_answer_position(str(r), sheets)[0] for r in ranges] == ranges


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
        ("'Sheet1!A1 x", "unbalanced quote in \"'Sheet1!A1 x\""),
        ("''!A1", "\"''!A1\" has an empty sheet name"),
    ],
)
def test_errors_name_the_part(text: str, message: str) -> None:
    assert message_of(RangeError, parse_answer_position, text) == message
