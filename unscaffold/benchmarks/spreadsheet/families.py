"""The 14 families of built-in spreadsheet tasks: each turns (random generator, variant) into a draft with
its inputs, golden sheets and answer position. Together they cover cell-level and sheet-level work,
prefilled example cells in the answer range (the rule must be inferred from them and they must
survive), several sheets, quoted sheet names with spaces, commas and quotes, dates, numbers that match
only after rounding, formulas to write and recalculate, column-only and multi-range answer positions,
and cells that must stay empty."""

from __future__ import annotations

import copy
import datetime as dt
import random
from collections.abc import Callable
from typing import Any

from . import solutions
from .sheets import (
    DEPTS,
    FIRST,
    LAST,
    PREFIXES,
    PRODUCTS,
    REGIONS,
    SHEET_LEVEL,
    Draft,
    Sheet,
    answered,
    day,
    people,
    pick,
    ref,
    table,
)


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
    rows: list[list[Any]] = []
    answers: dict[str, Any] = {}
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
    rows: list[list[Any]] = [[c] + [round(rng.uniform(100, 5000), 2) for _ in range(3)] + [None] for c in categories]
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
    rows: list[list[Any]] = [[f"{first} {last}", rng.choice(["Red", "Blue", "Green"]), rng.randint(8, 14)]
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
    rows: list[list[Any]] = [[day(rng), rng.choice(regions), rng.choice(FIRST), round(rng.uniform(50, 2500), 2)]
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
    rows: list[list[Any]] = [[r, round(rng.uniform(1000, 9000), 2), None] for r in regions]
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
