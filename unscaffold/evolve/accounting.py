"""What an edit did on the train split: tasks repaired, regressed and still failing."""

from __future__ import annotations

from pydantic import BaseModel

from unscaffold.evolve.failures import passed


class Delta(BaseModel):
    repaired: list[str]
    regressed: list[str]
    still_failing: list[str]
    solved: int
    tasks: int

    @property
    def net(self) -> int:
        return len(self.repaired) - len(self.regressed)


def delta(before: dict[str, float], after: dict[str, float]) -> Delta:
    """Compare one bank's per-task rewards with its parent's, over the tasks both ran."""
    tasks = sorted(set(before) & set(after))
    return Delta(
        repaired=[t for t in tasks if not passed(before[t]) and passed(after[t])],
        regressed=[t for t in tasks if passed(before[t]) and not passed(after[t])],
        still_failing=[t for t in tasks if not passed(before[t]) and not passed(after[t])],
        solved=sum(passed(after[t]) for t in tasks),
        tasks=len(tasks),
    )
