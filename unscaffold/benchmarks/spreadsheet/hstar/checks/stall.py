"""Before finishing: a reply that only announces a next step is not a finish; send the student back."""

# Rendered from the package's sources; its helpers are in sheetlib.py beside it.
# ruff: noqa
from __future__ import annotations

import re

from sheetlib import arguments, run

INTENT_ONLY = re.compile(r"^\s*(?:I will|I'll|I am going to|I'm going to|Let me|Next,? I|Now I will|Now I'll)\b", re.I)


def main() -> int:
    answer = arguments().get("final_answer", "")
    if INTENT_ONLY.search(answer):
        print("This reply only says what you will do next; nothing was run. Run the step with `execute`, "
              "then finish with the result.")
        return 1
    return 0


if __name__ == "__main__":
    run(main)
