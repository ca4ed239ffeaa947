"""What a built-in spreadsheet task is made of: its sheets, the task with its golden workbook and the
answer cells, the draft a family writes, the data pools and helpers families draw from, and writing a
workbook. The families are in `families.py`; building and solving tasks in `tasks.py`."""

from __future__ import annotations

import copy
import datetime as dt
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .ranges import column_letters, parse_answer_position, parse_ref, quote_sheet

CELL_LEVEL = "Cell-Level Manipulation"
SHEET_LEVEL = "Sheet-Level Manipulation"
VARIANTS = 5
TEST_VARIANTS = (1, 4)

FIRST = ["Alice", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Greta", "Hiroshi", "Ines", "Jonas", "Kofi",
         "Lena", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Stefan", "Tamsin", "Ugo", "Vera"]
LAST = ["Andersen", "Barros", "Castillo", "Dubois", "Eriksen", "Fischer", "Gallo", "Haddad", "Ivanova", "Jensen",
        "Kowalski", "Lindqvist", "Moreau", "Novak", "Okafor", "Petrov", "Quinn", "Rossi", "Santos", "Tanaka"]
DEPTS = ["Finance", "Logistics", "Marketing", "Research", "Support", "Legal"]
REGIONS = ["North", "South", "East", "West", "Central", "Coastal"]
PRODUCTS = ["Anvil", "Bracket", "Caster", "Dowel", "Elbow Joint", "Flange", "Gasket", "Hinge", "Insulator",
            "Jig", "Knob", "Lever", "Manifold", "Nozzle", "O-Ring", "Pulley"]
PREFIXES = {"EL": "Electronics", "HG": "Home & Garden", "TY": "Toys", "OF": "Office Supplies", "SP": "Sporting Goods"}


@dataclass
class Sheet:
    name: str
    cells: dict[str, Any] = field(default_factory=dict)  # "B3" -> value


@dataclass
class BuiltTask:
    """One task with everything needed to run and score it. `golden` never enters a workspace."""

    id: str
    family: str
    split: str
    instruction: str
    instruction_type: str
    answer_position: str
    inputs: list[Sheet]
    golden: list[Sheet]
    solution: str
    params: dict[str, Any]
    features: tuple[str, ...]
    prefilled: list[str] = field(default_factory=list)  # literal input cells inside the answer range

    def answer_cells(self) -> list[tuple[str, str]]:
        """(sheet, coordinate) of every cell the scorer compares, resolved on the golden workbook."""
        sheets = {s.name: s for s in self.golden}
        out = []
        for rng in parse_answer_position(self.answer_position, list(sheets)):
            sheet = sheets[rng.sheet if rng.sheet is not None else self.golden[0].name]
            inp = next((s for s in self.inputs if s.name == sheet.name), Sheet(sheet.name))
            max_row, max_col = used_size(sheet.cells, inp.cells)
            out += [(sheet.name, f"{column_letters(c)}{r}") for r, c in rng.cells(max_row, max_col)]
        return out

    def golden_value(self, sheet: str, coord: str) -> Any:
        """The expected value of one cell (None: must be empty)."""
        return next(s for s in self.golden if s.name == sheet).cells.get(coord)


def used_size(*cell_maps: dict[str, Any]) -> tuple[int, int]:
    """(last row, last column) used by any of the cell maps, at least (1, 1) as in openpyxl."""
    rows, cols = [1], [1]
    for cells in cell_maps:
        for coord in cells:
            rng = parse_ref(coord)
            rows.append(rng.max_row or 1)
            cols.append(rng.max_col or 1)
    return max(rows), max(cols)


@dataclass
class Draft:
    instruction: str
    answer_position: str
    inputs: list[Sheet]
    golden: list[Sheet]
    params: dict[str, Any]
    features: tuple[str, ...]
    instruction_type: str = CELL_LEVEL


def table(headers: list[str], rows: list[list[Any]], first_row: int = 1) -> dict[str, Any]:
    """Cells of a header row and data rows starting in column A; None values stay empty."""
    cells: dict[str, Any] = {}
    for r, row in enumerate([headers, *rows], start=first_row):
        for c, value in enumerate(row, start=1):
            if value is not None:
                cells[f"{column_letters(c)}{r}"] = value
    return cells


def answered(inputs: list[Sheet], sheet: str, answers: dict[str, Any]) -> list[Sheet]:
    """The golden sheets: a copy of the inputs with the answers written into `sheet` (None clears)."""
    golden = copy.deepcopy(inputs)
    target = next(s for s in golden if s.name == sheet)
    for coord, value in answers.items():
        if value is None:
            target.cells.pop(coord, None)
        else:
            target.cells[coord] = value
    return golden


def ref(sheet: str, rng: str) -> str:
    """`rng` on `sheet`, the sheet name quoted as Excel writes it."""
    return f"{quote_sheet(sheet)}!{rng}"


def pick(rng: random.Random, pool: list[str], n: int) -> list[str]:
    """n distinct items of a pool."""
    return rng.sample(pool, n)


def people(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """n (first, last) names with no first or last name repeated, so codes and sorts are unambiguous."""
    firsts, lasts = pick(rng, FIRST, n), pick(rng, LAST, n)
    return list(zip(firsts, lasts, strict=True))


def day(rng: random.Random, year: int = 2024) -> dt.datetime:
    """A date early enough in the year that adding payment terms stays within reach of the as-of dates."""
    return dt.datetime(year, 1, 1) + dt.timedelta(days=rng.randrange(0, 330))


def prefilled_cells(task: BuiltTask) -> list[str]:
    """Literal input cells inside the answer range of a cell-level task: they must survive unchanged.
    Sheet-level tasks rearrange their range, so nothing in it counts as prefilled."""
    if task.instruction_type != CELL_LEVEL:
        return []
    inputs = {s.name: s.cells for s in task.inputs}
    out = []
    for sheet, coord in task.answer_cells():
        value = inputs.get(sheet, {}).get(coord)
        if value is not None and not (isinstance(value, str) and value.startswith("=")):
            out.append(ref(sheet, coord))
    return out


def write_workbook(sheets: list[Sheet], path: Path) -> None:
    """Write the sheets in order; dates get a date format so they read back as dates."""
    import openpyxl

    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for sheet in sheets:
        ws = wb.create_sheet(sheet.name)
        for coord, value in sheet.cells.items():
            ws[coord] = value
            if isinstance(value, dt.datetime):
                ws[coord].number_format = "yyyy-mm-dd"
    path.parent.mkdir(parents=True, exist_ok=True)
    wb.save(path)
