"""Shared by the checks (they run only under h*, where the bank is mounted, so they may import the tool)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))

import check_reactants  # noqa: E402

ANSWER = "answer.txt"


def answer_lines() -> list[str] | None:
    """The non-empty lines of answer.txt, or None when it does not exist."""
    if not os.path.isfile(ANSWER):
        return None
    with open(ANSWER, encoding="utf-8", errors="replace") as f:
        return [line.strip() for line in f if line.strip()]


def checked(line: str) -> tuple:
    """check_reactants' verdict on one answer line against product.smi."""
    return check_reactants.check(line, check_reactants.product_smiles({}))


def stamp() -> str | None:
    if not os.path.isfile(check_reactants.STAMP):
        return None
    with open(check_reactants.STAMP, encoding="utf-8") as f:
        return f.read().strip()
