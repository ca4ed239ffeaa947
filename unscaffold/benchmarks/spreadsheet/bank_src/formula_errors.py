"""Before finishing: formulas in the output recalculate without error values (#DIV/0!, #NAME?, #REF!, ...)."""

from __future__ import annotations

from unscaffold.benchmarks.spreadsheet.bank_src.common import evaluate, has_formulas, name, run
from unscaffold.benchmarks.spreadsheet.bank_src.guard import opened, pairs
from unscaffold.benchmarks.spreadsheet.values import ERROR_LITERALS


def main() -> int:
    _, files = pairs()
    for _, target, _, out in opened(files, inputs=False):
        if not has_formulas(out):
            continue
        computed = evaluate(target) or {}
        errors = [f"{name(s, r, c)} = {v}" for (s, r, c), v in computed.items()
                  if isinstance(v, str) and v.strip() in ERROR_LITERALS]
        if errors:
            print(f"{target}: {len(errors)} formula(s) evaluate to an error: " + "; ".join(errors[:10]))
            return 1
    return 0


if __name__ == "__main__":
    run(main)
