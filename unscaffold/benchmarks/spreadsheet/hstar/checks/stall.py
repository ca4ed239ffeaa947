"""Before finishing: a reply that only announces a next step is not a finish; send the student back."""

# Self-contained script: the helpers it needs are included below.
# ruff: noqa

from __future__ import annotations

import json
import re
import sys
from typing import Any

class Problem(Exception):
    pass

def arguments() -> dict[str, Any]:
    try:
        return json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    except json.JSONDecodeError as e:
        raise Problem(f'the arguments are not JSON: {e}') from None

def run(main: Any) -> None:
    try:
        code = main()
    except Problem as e:
        print(e)
        code = 1
    sys.exit(code or 0)

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
