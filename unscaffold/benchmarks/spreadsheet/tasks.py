"""Built-in spreadsheet tasks: 14 families x 5 variants, generated deterministically in memory.

Generation is pure Python (no files) and takes milliseconds; workbooks are written only when a trial
needs them: the input when the workspace is prepared, the golden workbook when the trial is scored,
so it never exists while the student works. Variants 1 and 4 of each family form the test split.

The parts: `sheets.py` (what a task is made of), `families.py` (the families); here, building a task and
its reference solution as `execute` commands.
"""

from __future__ import annotations

import inspect
import random
import zlib

from . import solutions
from .families import FAMILIES
from .ranges import parse_answer_position
from .sheets import (
    CELL_LEVEL,
    SHEET_LEVEL,
    TEST_VARIANTS,
    VARIANTS,
    BuiltTask,
    Sheet,
    prefilled_cells,
    used_size,
    write_workbook,
)

__all__ = ["CELL_LEVEL", "SHEET_LEVEL", "BuiltTask", "Sheet", "all_tasks", "build", "oracle_commands", "solve_command",
           "write_workbook"]


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
