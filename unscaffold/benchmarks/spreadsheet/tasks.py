"""Built-in spreadsheet tasks: 14 families x 5 variants, generated deterministically in memory.

Generation is pure Python (no files) and takes milliseconds; workbooks are written only when a trial
needs them: the input when the workspace is prepared, the golden workbook when the trial is scored,
so it never exists while the student works. Variants 1 and 4 of each family form the test split.

Together the families cover cell-level and sheet-level work, prefilled example cells in the answer
range (the rule must be inferred from them and they must survive), several sheets, quoted sheet names
with spaces, commas and quotes, dates, numbers that match only after rounding, formulas to write and
recalculate, column-only and multi-range answer positions, and cells that must stay empty.
"""

from __future__ import annotations

import copy
import datetime as dt
import inspect
import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unscaffold.benchmarks.spreadsheet import solutions
from unscaffold.benchmarks.spreadsheet.ranges import column_letters, parse_answer_position, parse_ref, quote_sheet

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


# ---- families: (rng, variant) -> Draft ------------------------------------------------------------


def fam_line_totals(rng: random.Random, v: int) -> Draft:
    """Cell-level arithmetic whose gold is rounded to cents: matches only after the scorer's rounding."""
    sheet = ["Orders", "Sales 2024", "Q3 Orders", "Orders", "Web Orders"][v]
    n = rng.randint(6, 10)
    rows, answers = [], {}
    for i, item in enumerate(pick(rng, PRODUCTS, n), start=2):
        qty, price = rng.randint(1, 40), round(rng.uniform(2, 90), 2)
        discount = rng.choice([0, 0.05, 0.1, 0.125, 0.15, 0.175])
        rows.append([item, qty, price, discount, None])
        answers[f"E{i}"] = round(qty * price * (1 - discount), 2)
    inputs = [Sheet(sheet, table(["Item", "Qty", "Unit Price", "Discount", "Net"], rows))]
    position = f"E2:E{n + 1}" if v % 2 == 0 else ref(sheet, f"E2:E{n + 1}")
    return Draft(
        f"Fill the Net column (E) of the '{sheet}' sheet: the quantity times the unit price, less the discount "
        "in column D (a fraction of the price).",
        position, inputs, answered(inputs, sheet, answers), {"sheet": sheet}, ("rounding",))


def fam_staff_codes(rng: random.Random, v: int) -> Draft:
    """A code pattern shown only by prefilled examples (three patterns over the variants)."""
    sheet = "Staff" if v != 3 else "Staff List"
    rule = list(solutions.STAFF_RULES)[v % 3]
    n = rng.randint(7, 11)
    examples = 2 if v % 2 == 0 else 3
    rows, answers = [], {}
    for i, (first, last) in enumerate(people(rng, n), start=2):
        dept = rng.choice(DEPTS)
        code = solutions.staff_code(rule, first, last, dept)
        rows.append([first, last, dept, code if i - 2 < examples else None])
        answers[f"D{i}"] = code
    inputs = [Sheet(sheet, table(["First Name", "Last Name", "Department", "Staff Code"], rows))]
    return Draft(
        "Column D holds each person's staff code. The first rows are already filled in as examples; fill in the "
        "codes of everyone else, following exactly the same pattern.",
        ref(sheet, f"D2:D{n + 1}") if v == 3 else f"D2:D{n + 1}", inputs, answered(inputs, sheet, answers),
        {"sheet": sheet, "rule": rule}, ("prefilled",))


def fam_category_prefix(rng: random.Random, v: int) -> Draft:
    """A prefix -> category mapping learnt from examples scattered through the column."""
    sheet = ["Products", "Catalogue", "Products", "Stock Items", "Products"][v]
    prefixes = pick(rng, list(PREFIXES), 3 + v % 3)
    n = rng.randint(9, 13)
    codes = [f"{prefixes[i % len(prefixes)]}-{rng.randint(1000, 9999)}" for i in range(n)]
    rng.shuffle(codes)
    seen: set[str] = set()
    rows, answers = [], {}
    for i, code in enumerate(codes, start=2):
        prefix = code.split("-")[0]
        category = PREFIXES[prefix]
        rows.append([code, f"{rng.choice(PRODUCTS)} {rng.randint(2, 9)}", category if prefix not in seen else None])
        seen.add(prefix)
        answers[f"C{i}"] = category
    inputs = [Sheet(sheet, table(["Code", "Description", "Category"], rows))]
    return Draft(
        "Fill in the Category of every product. The category follows from the prefix of the product code; the "
        "rows that already have a category show which prefix belongs to which category.",
        f"C2:C{n + 1}", inputs, answered(inputs, sheet, answers), {"sheet": sheet}, ("prefilled",))


def fam_due_dates(rng: random.Random, v: int) -> Draft:
    """Date arithmetic (dates compare as serial numbers); odd variants add a status and a two-range position."""
    sheet = "Invoices" if v != 2 else "Open Invoices"
    status = v % 2 == 1
    n = rng.randint(6, 9)
    as_of = dt.datetime(2024, rng.randint(6, 10), rng.randint(1, 28))
    rows, answers = [], {}
    for i in range(2, n + 2):
        issued, terms = day(rng), rng.choice([14, 30, 45, 60])
        due = issued + dt.timedelta(days=terms)
        rows.append([f"INV-{rng.randint(10000, 99999)}", rng.choice(LAST) + " Ltd", issued, terms, None])
        answers[f"E{i}"] = due
        if status:
            answers[f"F{i}"] = "Overdue" if as_of > due else "Open"
    headers = ["Invoice", "Customer", "Issued", "Terms (days)", "Due Date"] + (["Status"] if status else [])
    cells = table(headers, rows)
    if status:
        cells.update({"H1": "As of", "I1": as_of})
    inputs = [Sheet(sheet, cells)]
    text = "Fill in the Due Date of each invoice (column E): the issue date plus the payment terms in days."
    position = f"E2:E{n + 1}"
    if status:
        text += (" Then set Status (column F) to Overdue when the due date is before the date in I1, "
                 "otherwise to Open.")
        position = f"E2:E{n + 1}, F2:F{n + 1}"
    return Draft(text, position, inputs, answered(inputs, sheet, answers), {"sheet": sheet, "status": status},
                 ("dates",) + (("multi-range",) if status else ()))


def fam_budget_formulas(rng: random.Random, v: int) -> Draft:
    """Totals asked for as formulas: the output must be recalculated before it can be compared."""
    sheet = "Budget" if v % 2 == 0 else "Budget Q1"
    categories = pick(rng, ["Rent", "Salaries", "Travel", "Software", "Training", "Utilities", "Catering"], 4 + v % 3)
    rows = [[c] + [round(rng.uniform(100, 5000), 2) for _ in range(3)] + [None] for c in categories]
    total_row = len(rows) + 2
    cells = table(["Category", "Jan", "Feb", "Mar", "Total"], rows + [["Total", None, None, None, None]])
    cells.update({"G1": "Entries", "H1": f"=COUNT(B2:D{total_row - 1})"})
    answers = {f"E{r}": round(sum(rows[r - 2][1:4]), 2) for r in range(2, total_row)}
    for c, col in enumerate("BCD", start=1):
        answers[f"{col}{total_row}"] = round(sum(row[c] for row in rows), 2)
    answers[f"E{total_row}"] = round(sum(row[c] for row in rows for c in (1, 2, 3)), 2)
    inputs = [Sheet(sheet, cells)]
    return Draft(
        f"Complete the totals with formulas, so they update when a number changes: column E sums each category's "
        f"three months, and row {total_row} (Total) sums each month column and column E.",
        ref(sheet, f"E2:E{total_row}") + "," + ref(sheet, f"B{total_row}:D{total_row}"), inputs,
        answered(inputs, sheet, answers), {"sheet": sheet, "total_row": total_row}, ("formulas", "multi-range"))


def fam_price_lookup(rng: random.Random, v: int) -> Draft:
    """A lookup on a second sheet with a quoted name (spaces, a comma, a quote); unknown products stay empty."""
    prices_sheet = ["Price List", "Prices, 2024", "Bob's Prices", "Tarif (EUR)", "Price List"][v]
    sheet = "Order Lines"
    catalogue = pick(rng, PRODUCTS, 8)
    prices = {p: round(rng.uniform(1, 60), 2) for p in catalogue}
    n = rng.randint(7, 10)
    rows, answers = [], {}
    for i in range(2, n + 2):
        unknown = v >= 2 and i == 4  # one product that is not on the price list
        product = "Widget X" if unknown else rng.choice(catalogue)
        qty = rng.randint(1, 12)
        rows.append([f"SO-{rng.randint(100, 999)}", product, qty, None, None])
        answers[f"D{i}"] = None if unknown else prices[product]
        answers[f"E{i}"] = None if unknown else round(qty * prices[product], 2)
    orders = Sheet(sheet, table(["Order", "Product", "Qty", "Unit Price", "Line Total"], rows))
    price_list = Sheet(prices_sheet, table(["Product", "Price"], [[p, prices[p]] for p in sorted(prices)]))
    inputs = [orders, price_list] if v % 2 == 0 else [price_list, orders]
    text = (f"On the '{sheet}' sheet, look up each product's Unit Price on the '{prices_sheet}' sheet (column D) "
            "and compute the Line Total as Qty times Unit Price (column E).")
    if v >= 2:
        text += " Leave both cells empty for a product that is not on the price list."
    return Draft(text, ref(sheet, f"D2:D{n + 1}") + "," + ref(sheet, f"E2:E{n + 1}"), inputs,
                 answered(inputs, sheet, answers), {"sheet": sheet, "prices": prices_sheet},
                 ("multi-sheet", "quoted-sheet", "rounding", "multi-range"))


def fam_sort_table(rng: random.Random, v: int) -> Draft:
    """Sheet-level: the whole table re-ordered, with a tie-break; even variants use a column-only range."""
    sheet = "Scores" if v != 3 else "League Table"
    n = rng.randint(7, 10)
    rows = [[f"{first} {last}", rng.choice(["Red", "Blue", "Green"]), rng.randint(8, 14)]
            for first, last in people(rng, n)]
    rows[-1][2] = rows[0][2]  # at least one tie
    golden_rows = sorted(rows, key=lambda r: (-r[2], r[0]))
    inputs = [Sheet(sheet, table(["Name", "Team", "Points"], rows))]
    golden = [Sheet(sheet, table(["Name", "Team", "Points"], golden_rows))]
    position = "A:C" if v % 2 == 0 else f"A1:C{n + 1}"
    return Draft(
        "Sort the table by Points, highest first; players with equal points go in alphabetical order of Name. "
        "Keep the header in row 1.",
        position, inputs, golden, {"sheet": sheet}, ("column-range",) if v % 2 == 0 else (), SHEET_LEVEL)


def fam_drop_cancelled(rng: random.Random, v: int) -> Draft:
    """Sheet-level: rows deleted and shifted up, so the bottom rows of the range must end up empty."""
    sheet = "Orders" if v % 2 == 0 else "Order Log"
    n = rng.randint(8, 12)
    rows = [[f"A{1000 + i}", rng.choice(LAST), rng.choice(["Shipped", "Open", "Cancelled", "Shipped"]),
             round(rng.uniform(10, 900), 2)] for i in range(n)]
    rows[1][2] = rows[-1][2] = "Cancelled"
    kept = [r for r in rows if r[2] != "Cancelled"]
    inputs = [Sheet(sheet, table(["Order ID", "Customer", "Status", "Amount"], rows))]
    golden = [Sheet(sheet, table(["Order ID", "Customer", "Status", "Amount"], kept))]
    return Draft(
        "Delete every order whose Status is Cancelled, so that the remaining rows move up and leave no gaps.",
        f"A1:D{n + 1}", inputs, golden, {"sheet": sheet}, ("empty-cells",), SHEET_LEVEL)


def fam_region_summary(rng: random.Random, v: int) -> Draft:
    """Sheet-level: a new sheet (names with spaces and a comma) holding grouped totals."""
    summary = ["Summary", "Region Totals", "By Region", "Summary", "Totals, by region"][v]
    regions = pick(rng, REGIONS, 3 + v % 3)
    rows = [[day(rng), rng.choice(regions), rng.choice(FIRST), round(rng.uniform(50, 2500), 2)]
            for _ in range(rng.randint(10, 15))]
    totals: dict[str, float] = {}
    for row in rows:
        totals[row[1]] = totals.get(row[1], 0) + row[3]
    data = Sheet("Sales", table(["Date", "Region", "Rep", "Amount"], rows))
    result = Sheet(summary, table(["Region", "Total"], [[r, round(totals[r], 2)] for r in sorted(totals)]))
    return Draft(
        f"Add a new sheet named '{summary}' with the headers Region and Total in A1:B1, then one row per region in "
        "alphabetical order with the total Amount of that region's sales.",
        ref(summary, f"A1:B{len(totals) + 1}"), [data], [copy.deepcopy(data), result],
        {"sheet": "Sales", "summary": summary}, ("multi-sheet", "rounding", "dates"), SHEET_LEVEL)


def fam_grade_bands(rng: random.Random, v: int) -> Draft:
    """Examples in the answer range plus a band table on another sheet."""
    sheet, bands_sheet = "Results", ["Bands", "Grade Bands", "Bands", "Scale (2024)", "Bands"][v]
    lows = sorted(rng.sample(range(40, 90, 5), 4))
    bands = [(0, "F"), (lows[0], "D"), (lows[1], "C"), (lows[2], "B"), (lows[3], "A")]
    n = rng.randint(8, 12)
    examples = {2, 3, 4} if v % 2 == 0 else {2, 5}
    rows, answers = [], {}
    for i, (first, last) in enumerate(people(rng, n), start=2):
        score = rng.randint(20, 100)
        grade = [g for low, g in bands if score >= low][-1]
        rows.append([f"{first} {last}", score, grade if i in examples else None])
        answers[f"C{i}"] = grade
    inputs = [Sheet(sheet, table(["Student", "Score", "Grade"], rows)),
              Sheet(bands_sheet, table(["Min Score", "Grade"], [list(b) for b in bands]))]
    return Draft(
        f"Fill in each student's Grade using the bands on the '{bands_sheet}' sheet: a score gets the grade of the "
        "highest band minimum it reaches. Some grades are already filled in.",
        f"C2:C{n + 1}", inputs, answered(inputs, sheet, answers), {"sheet": sheet, "bands": bands_sheet},
        ("prefilled", "multi-sheet"))


def fam_split_names(rng: random.Random, v: int) -> Draft:
    """Two output columns in a two-range position; variants 0 and 3 give the first row as an example."""
    sheet = "Contacts" if v != 2 else "Client Contacts"
    n = rng.randint(6, 10)
    example = v % 3 == 0
    rows, answers = [], {}
    for i, (first, last) in enumerate(people(rng, n), start=2):
        rows.append([f"{last}, {first}", first if example and i == 2 else None, last if example and i == 2 else None])
        answers[f"B{i}"], answers[f"C{i}"] = first, last
    inputs = [Sheet(sheet, table(["Full Name", "First Name", "Last Name"], rows))]
    position = f"B2:B{n + 1}, C2:C{n + 1}" if v != 2 else f"{ref(sheet, f'B2:B{n + 1}')},{ref(sheet, f'C2:C{n + 1}')}"
    text = "Full Name holds \"Last, First\". Split it: the first name into column B and the last name into column C."
    if example:
        text += " The first row is done as an example."
    return Draft(text, position, inputs, answered(inputs, sheet, answers), {"sheet": sheet},
                 ("multi-range",) + (("prefilled",) if example else ()))


TEXT_DATE_FORMATS = ["%d/%m/%Y", "%Y.%m.%d", "%d-%b-%Y", "%m/%d/%Y", "%d.%m.%Y"]


def fam_text_dates(rng: random.Random, v: int) -> Draft:
    """Text dates in five formats turned into real dates; the example row fixes day/month order."""
    sheet = "Log" if v % 2 == 0 else "Visit Log"
    fmt = TEXT_DATE_FORMATS[v]
    n = rng.randint(6, 10)
    rows, answers = [], {}
    for i in range(2, n + 2):
        when = day(rng, 2023 + v % 2)
        if i == 2:  # the example row: a day above 12 shows the order of day and month
            when = when.replace(day=rng.randint(13, 28))
        rows.append([f"Visit {i - 1}", when.strftime(fmt), when if i == 2 else None])
        answers[f"C{i}"] = when
    inputs = [Sheet(sheet, table(["Entry", "Date (text)", "Date"], rows))]
    return Draft(
        "Column B holds dates typed as text. Put each one into column C as a real date; the first row shows how "
        "the text is to be read.",
        f"C2:C{n + 1}", inputs, answered(inputs, sheet, answers), {"sheet": sheet, "format": fmt},
        ("prefilled", "dates"))


def fam_running_balance(rng: random.Random, v: int) -> Draft:
    """A running sum from a prefilled opening balance; variant 2 answers with chained formulas."""
    sheet = "Ledger" if v % 2 == 0 else "Cash Book"
    dates = sorted(day(rng) for _ in range(rng.randint(7, 11)))
    balance = round(rng.uniform(500, 3000), 2)
    rows, answers = [], {}
    for i, when in enumerate(dates, start=2):
        money_in = round(rng.uniform(0, 400), 2) if rng.random() < 0.5 else None
        money_out = round(rng.uniform(0, 300), 2) if money_in is None else None
        if i > 2:
            balance = balance + (money_in or 0) - (money_out or 0)
        description = rng.choice(["Invoice", "Refund", "Fees", "Transfer", "Supplies"])
        rows.append([when, description, money_in, money_out, balance if i == 2 else None])
        answers[f"E{i}"] = round(balance, 2)
    inputs = [Sheet(sheet, table(["Date", "Description", "In", "Out", "Balance"], rows))]
    return Draft(
        "Fill in the running Balance (column E): each row's balance is the previous balance plus In minus Out. "
        "The opening balance in the first row is given.",
        f"E2:E{len(dates) + 1}", inputs, answered(inputs, sheet, answers), {"sheet": sheet, "formulas": v == 2},
        ("prefilled", "rounding") + (("formulas",) if v == 2 else ()))


def fam_share_of_total(rng: random.Random, v: int) -> Draft:
    """Shares as fractions or percentage numbers, on sheets whose names need quoting."""
    sheet = ["Q1, Q2 Sales", "Bob's Regions", "Sales", "Region 'A' & 'B'", "Sales, EMEA"][v]
    percent = v % 2 == 1
    regions = pick(rng, REGIONS, 4 + v % 3)
    rows = [[r, round(rng.uniform(1000, 9000), 2), None] for r in regions]
    total = sum(r[1] for r in rows)
    answers = {f"C{i}": round(r[1] / total * (100 if percent else 1), 2) for i, r in enumerate(rows, start=2)}
    inputs = [Sheet(sheet, table(["Region", "Sales", "Share"], rows))]
    unit = "as a percentage number (25 for 25%)" if percent else "as a fraction of 1"
    return Draft(f"Fill in each region's Share of the total sales, {unit}.",
                 ref(sheet, f"C2:C{len(rows) + 1}"), inputs, answered(inputs, sheet, answers),
                 {"sheet": sheet, "scale": 100 if percent else 1}, ("quoted-sheet", "rounding"))


FAMILIES: dict[str, Callable[[random.Random, int], Draft]] = {
    "line-totals": fam_line_totals,
    "staff-codes": fam_staff_codes,
    "category-prefix": fam_category_prefix,
    "due-dates": fam_due_dates,
    "budget-formulas": fam_budget_formulas,
    "price-lookup": fam_price_lookup,
    "sort-table": fam_sort_table,
    "drop-cancelled": fam_drop_cancelled,
    "region-summary": fam_region_summary,
    "grade-bands": fam_grade_bands,
    "split-names": fam_split_names,
    "text-dates": fam_text_dates,
    "running-balance": fam_running_balance,
    "share-of-total": fam_share_of_total,
}


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


def build(family: str, variant: int) -> BuiltTask:
    """One task; its random data depends only on (family, variant), so every run sees the same task."""
    rng = random.Random(zlib.crc32(f"{family}/{variant}".encode()))
    draft = FAMILIES[family](rng, variant)
    task = BuiltTask(
        id=f"{family}-{variant}", family=family, split="test" if variant in TEST_VARIANTS else "train",
        instruction=draft.instruction, instruction_type=draft.instruction_type,
        answer_position=draft.answer_position, inputs=draft.inputs, golden=draft.golden,
        solution=family.replace("-", "_"), params=draft.params, features=draft.features,
    )
    task.prefilled = prefilled_cells(task)
    return task


def all_tasks() -> list[BuiltTask]:
    """Every built-in task, both splits, in a fixed order."""
    return [build(family, v) for family in FAMILIES for v in range(VARIANTS)]


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


# ---- the reference solution as commands through `execute` ------------------------------------------

HEADER = "import datetime\nimport re\nfrom typing import Any\n\nimport openpyxl\n"


def python_heredoc(body: str) -> str:
    """One `execute` command running a Python program (quoted heredoc: no shell expansion inside)."""
    return f"python3 - <<'PY'\n{body.rstrip()}\nPY"


def inspect_command(input_path: str) -> str:
    """The oracle looks first: every sheet's size and first rows."""
    return python_heredoc(f"""{HEADER}
wb = openpyxl.load_workbook({input_path!r})
for ws in wb.worksheets:
    print(f"== sheet {{ws.title!r}}: {{ws.dimensions}} ({{ws.max_row}} rows, {{ws.max_column}} columns)")
    for row in ws.iter_rows(min_row=1, max_row=min(ws.max_row, 12), values_only=True):
        print(row)""")


def solve_command(task: BuiltTask, input_path: str, output_path: str) -> str:
    """The family's solution function, shipped as source, applied to the input and saved as the output."""
    names = [*solutions.HELPERS.get(task.solution, ()), task.solution]
    source = "\n\n".join(inspect.getsource(getattr(solutions, name)) for name in names)
    return "mkdir -p output && " + python_heredoc(f"""{HEADER}

{source}

wb = openpyxl.load_workbook({input_path!r})
{task.solution}(wb, {task.params!r})
wb.save({output_path!r})
print("saved", {output_path!r})""")


RECALCULATE = """
import contextlib, io
import formulas  # openpyxl does not compute formulas: evaluate them to see the results
with contextlib.redirect_stderr(io.StringIO()):
    solution = formulas.ExcelModel().loads({output!r}).finish().calculate()
errors = [k for k, v in solution.items() if str(getattr(v, "value", [[v]])[0][0]).startswith("#")]
assert not errors, f"formulas with error values: {{errors}}"
print(f"formulas recalculated: {{len(solution)}} cells, no error values")"""


def verify_command(task: BuiltTask, input_path: str, output_path: str) -> str:
    """Reopen the saved output beside the input: prefilled cells unchanged, answer cells filled."""
    boxes = []
    for rng in parse_answer_position(task.answer_position, [s.name for s in task.golden]):
        sheet = rng.sheet if rng.sheet is not None else task.golden[0].name
        boxes.append((sheet, *rng.bounds(*used_size(*(s.cells for s in task.inputs if s.name == sheet)))))
    keep = task.instruction_type == CELL_LEVEL
    return python_heredoc(f"""{HEADER}
src = openpyxl.load_workbook({input_path!r})
out = openpyxl.load_workbook({output_path!r})
changed, filled, total = [], 0, 0
for sheet, r1, c1, r2, c2 in {boxes!r}:
    for r in range(r1, r2 + 1):
        for c in range(c1, c2 + 1):
            total += 1
            new = out[sheet].cell(r, c).value
            filled += new not in (None, "")
            old = src[sheet].cell(r, c).value if sheet in src.sheetnames else None
            if {keep!r} and old not in (None, "") and new != old:
                changed.append((sheet, out[sheet].cell(r, c).coordinate, old, new))
assert not changed, f"prefilled cells changed: {{changed}}"
assert filled, "the answer range is empty"
print(f"answer range: {{filled}}/{{total}} cells filled; prefilled cells unchanged")
{RECALCULATE.format(output=output_path) if "formulas" in task.features else ""}""")


def oracle_commands(task: BuiltTask, input_path: str, output_path: str) -> list[str]:
    """Inspect, solve, verify: what a careful student does, so oracle runs also exercise the detectors."""
    return [inspect_command(input_path), solve_command(task, input_path, output_path),
            verify_command(task, input_path, output_path)]
