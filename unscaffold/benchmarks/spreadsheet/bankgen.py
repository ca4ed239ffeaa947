"""Which of the spreadsheet bank's scripts are rendered from which source in bank_src/ (with ranges.py and
values.py); the checks share one rendered library, `checks/sheetlib.py`. How rendering works, and why:
`unscaffold/benchmarks/bankgen.py`. `python -m unscaffold.benchmarks.spreadsheet.bankgen` rewrites the
scripts (`--check` only lists the stale ones).
"""

from __future__ import annotations

import sys

from unscaffold.benchmarks.bankgen import BankSources

SCRIPTS = {
    "tools/inspect_workbook.py": "bank_src/inspect_workbook.py",
    "tools/write_cells.py": "bank_src/write_cells.py",
    "tools/verify_output.py": "bank_src/verify_output.py",
    "checks/prefilled_guard.py": "bank_src/prefilled_guard.py",
    "checks/output_opens.py": "bank_src/output_opens.py",
    "checks/formula_errors.py": "bank_src/formula_errors.py",
    "checks/answer_range.py": "bank_src/answer_range.py",
    "checks/repeated_error.py": "bank_src/repeated_error.py",
    "checks/stall.py": "bank_src/stall.py",
    "checks/turn_budget.py": "bank_src/turn_budget.py",
}
LIBRARY = "checks/sheetlib.py"
SOURCES = BankSources("spreadsheet", SCRIPTS, LIBRARY)
rendered, stale, write = SOURCES.rendered, SOURCES.stale, SOURCES.write

if __name__ == "__main__":
    sys.exit(SOURCES.main(sys.argv[1:]))
