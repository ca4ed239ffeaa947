"""Reference solutions of the built-in task families, one function per family.

Each function works on the input workbook only (what the student sees) and is shipped to the sandbox
as source inside a `python3` heredoc (tasks.oracle_commands), so it may use only `datetime`, `re`,
openpyxl and the helpers named in HELPERS. The generator computes the golden answers on its own,
from the data it made, so an oracle pass checks both sides.
"""

from __future__ import annotations

import datetime
from typing import Any

HELPERS = {"staff_codes": ("staff_code",)}  # module functions a solution calls; shipped with it


def line_totals(wb: Any, p: dict[str, Any]) -> None:
    ws = wb[p["sheet"]]
    for r in range(2, ws.max_row + 1):
        qty, price, discount = (ws.cell(r, c).value for c in (2, 3, 4))
        if qty is not None:
            ws.cell(r, 5).value = qty * price * (1 - discount)


STAFF_RULES = ("initial_dot_last", "last3_first2", "dept_dash_last")


def staff_code(rule: str, first: str, last: str, dept: str) -> str:
    """The code patterns of the staff-codes family (the generator uses it too: it defines the task)."""
    if rule == "initial_dot_last":
        return f"{first[0]}.{last}".upper()
    if rule == "last3_first2":
        return (last[:3] + first[:2]).upper()
    return f"{dept[:3].upper()}-{last.lower()}"


def staff_codes(wb: Any, p: dict[str, Any]) -> None:
    ws = wb[p["sheet"]]
    for r in range(2, ws.max_row + 1):
        first, last, dept = (ws.cell(r, c).value for c in (1, 2, 3))
        if first and ws.cell(r, 4).value in (None, ""):  # the filled-in rows are the examples: keep them
            ws.cell(r, 4).value = staff_code(p["rule"], first, last, dept)


def category_prefix(wb: Any, p: dict[str, Any]) -> None:
    ws = wb[p["sheet"]]
    mapping = {}  # the rows that already have a category are the examples: prefix -> category
    for r in range(2, ws.max_row + 1):
        code, category = ws.cell(r, 1).value, ws.cell(r, 3).value
        if code and category:
            mapping[code.split("-")[0]] = category
    for r in range(2, ws.max_row + 1):
        code = ws.cell(r, 1).value
        if code and ws.cell(r, 3).value in (None, ""):
            ws.cell(r, 3).value = mapping[code.split("-")[0]]


def due_dates(wb: Any, p: dict[str, Any]) -> None:
    ws = wb[p["sheet"]]
    as_of = ws["I1"].value if p["status"] else None
    for r in range(2, ws.max_row + 1):
        issued, terms = ws.cell(r, 3).value, ws.cell(r, 4).value
        if issued is None:
            continue
        due = issued + datetime.timedelta(days=terms)
        ws.cell(r, 5).value = due
        ws.cell(r, 5).number_format = "yyyy-mm-dd"
        if as_of is not None:
            ws.cell(r, 6).value = "Overdue" if as_of > due else "Open"


def budget_formulas(wb: Any, p: dict[str, Any]) -> None:
    ws = wb[p["sheet"]]
    last = p["total_row"]
    for r in range(2, last):
        ws.cell(r, 5).value = f"=SUM(B{r}:D{r})"
    for col in "BCDE":
        ws[f"{col}{last}"] = f"=SUM({col}2:{col}{last - 1})"


def price_lookup(wb: Any, p: dict[str, Any]) -> None:
    prices = {row[0]: row[1] for row in wb[p["prices"]].iter_rows(min_row=2, values_only=True) if row[0]}
    ws = wb[p["sheet"]]
    for r in range(2, ws.max_row + 1):
        product, qty = ws.cell(r, 2).value, ws.cell(r, 3).value
        if product is None:
            continue
        price = prices.get(product)
        ws.cell(r, 4).value = price if price is not None else ""
        ws.cell(r, 5).value = qty * price if price is not None else ""


def sort_table(wb: Any, p: dict[str, Any]) -> None:
    ws = wb[p["sheet"]]
    rows = [list(r) for r in ws.iter_rows(min_row=2, max_row=ws.max_row, values_only=True) if r[0] is not None]
    rows.sort(key=lambda r: (-r[2], r[0]))
    for i, row in enumerate(rows, start=2):
        for c, value in enumerate(row, start=1):
            ws.cell(i, c).value = value


def drop_cancelled(wb: Any, p: dict[str, Any]) -> None:
    ws = wb[p["sheet"]]
    for r in range(ws.max_row, 1, -1):
        if ws.cell(r, 3).value == "Cancelled":
            ws.delete_rows(r)


def region_summary(wb: Any, p: dict[str, Any]) -> None:
    totals: dict[str, float] = {}
    for row in wb[p["sheet"]].iter_rows(min_row=2, values_only=True):
        if row[1] is not None:
            totals[row[1]] = totals.get(row[1], 0) + row[3]
    out = wb.create_sheet(p["summary"])
    out.append(["Region", "Total"])
    for region in sorted(totals):
        out.append([region, totals[region]])


def grade_bands(wb: Any, p: dict[str, Any]) -> None:
    bands = sorted(r for r in wb[p["bands"]].iter_rows(min_row=2, values_only=True) if r[0] is not None)
    ws = wb[p["sheet"]]
    for r in range(2, ws.max_row + 1):
        score = ws.cell(r, 2).value
        if score is not None and ws.cell(r, 3).value in (None, ""):
            ws.cell(r, 3).value = [grade for low, grade in bands if score >= low][-1]


def split_names(wb: Any, p: dict[str, Any]) -> None:
    ws = wb[p["sheet"]]
    for r in range(2, ws.max_row + 1):
        full = ws.cell(r, 1).value
        if not full:
            continue
        last, first = (part.strip() for part in full.split(",", 1))
        for col, value in ((2, first), (3, last)):
            if ws.cell(r, col).value in (None, ""):
                ws.cell(r, col).value = value


def text_dates(wb: Any, p: dict[str, Any]) -> None:
    ws = wb[p["sheet"]]
    for r in range(2, ws.max_row + 1):
        text = ws.cell(r, 2).value
        if text and ws.cell(r, 3).value in (None, ""):
            ws.cell(r, 3).value = datetime.datetime.strptime(text.strip(), p["format"])
            ws.cell(r, 3).number_format = "yyyy-mm-dd"


def running_balance(wb: Any, p: dict[str, Any]) -> None:
    ws = wb[p["sheet"]]
    balance = ws.cell(2, 5).value  # the opening row is filled in: it is the example
    for r in range(3, ws.max_row + 1):
        money_in, money_out = ws.cell(r, 3).value or 0, ws.cell(r, 4).value or 0
        if p["formulas"]:
            ws.cell(r, 5).value = f"=E{r - 1}+C{r}-D{r}"
        else:
            balance = balance + money_in - money_out
            ws.cell(r, 5).value = balance


def share_of_total(wb: Any, p: dict[str, Any]) -> None:
    ws = wb[p["sheet"]]
    rows = [r for r in range(2, ws.max_row + 1) if ws.cell(r, 1).value]
    total = sum(ws.cell(r, 2).value for r in rows)
    for r in rows:
        ws.cell(r, 3).value = ws.cell(r, 2).value / total * p["scale"]
