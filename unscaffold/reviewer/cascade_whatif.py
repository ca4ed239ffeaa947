"""What the cascade's gate would have saved on a run that was reviewed on every step, and what it would
have let through.

The recipe reviews every step until the replace budget is spent; reviewing only risky steps is named as
future work. Before paying for a collection a team wants both sides of that trade from a run it already
has: the share of reviewer calls the gate skips, and the REPLACE decisions that were made on exactly
those skipped steps (corrections the collection would have lost). The gate is `cascade.step_kind`, the
same function `cascade:SPEC` uses live, applied to each logged proposal and its logged middleware hints.

First-order only: a REPLACE let through would also leave one more unit of replace budget, and the
trajectory after it would differ; neither can be known from the logged run.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unscaffold.errors import InputError
from unscaffold.iojson import read_json, validation_error
from unscaffold.llm.types import AssistantResponse
from unscaffold.reviewer.cascade import STEP_KINDS, step_kind
from unscaffold.run.folder import RunFolder, TrialFolder

ALL = "all"


class ReviewLine(BaseModel):
    """The fields of a `reviews.jsonl` line the what-if reads (the hook writes more)."""

    model_config = ConfigDict(extra="ignore")
    trial_id: str
    turn: int
    reviewer: str
    decision: str
    proposal: AssistantResponse
    hints: list[dict[str, Any]] = Field(default_factory=list)
    calls: int = 0
    skipped: str | None = None


class GateCell(BaseModel):
    """Counts for one suite and one kind of step (or `all`)."""

    suite: str
    kind: str
    reviewed_steps: int = 0
    reviewer_calls: int = 0
    replacements: int = 0
    skipped_steps: int = Field(0, description="reviewed steps the gate would not have sent to the reviewer")
    calls_saved: int = 0
    replacements_let_through: int = 0

    @property
    def saved_review_share(self) -> float:
        """Reviews the gate skips: with a model reviewer each is at least one call (plus retries)."""
        return self.skipped_steps / self.reviewed_steps if self.reviewed_steps else 0.0

    @property
    def saved_call_share(self) -> float:
        return self.calls_saved / self.reviewer_calls if self.reviewer_calls else 0.0

    @property
    def missed_replacement_share(self) -> float:
        return self.replacements_let_through / self.replacements if self.replacements else 0.0

    def add(self, line: ReviewLine, gated_out: bool) -> None:
        replaced = line.decision == "REPLACE"
        self.reviewed_steps += 1
        self.reviewer_calls += line.calls
        self.replacements += int(replaced)
        if gated_out:
            self.skipped_steps += 1
            self.calls_saved += line.calls
            self.replacements_let_through += int(replaced)


class CascadeWhatIf(BaseModel):
    """Per suite and kind of step; `kind == "all"` rows are the suite totals, suite `all` the grand total."""

    runs: list[str]
    gate: str = "cascade: review when a middleware hint fires, the proposal finishes, or its command writes files"
    cells: list[GateCell]
    not_reviewed_steps: int = Field(0, description="steps the run itself never sent to a reviewer (budget spent)")
    trials: int = 0

    def cell(self, suite: str, kind: str) -> GateCell:
        return next(c for c in self.cells if c.suite == suite and c.kind == kind)

    def summary(self) -> dict[str, float]:
        total = self.cell(ALL, ALL)
        return {"saved_review_share": total.saved_review_share, "saved_call_share": total.saved_call_share,
                "missed_replacement_share": total.missed_replacement_share}


def read_review_lines(path: Path) -> list[ReviewLine]:
    """Each line validated; a bad one is a one-line error naming the file and line."""
    lines: list[ReviewLine] = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            lines.append(ReviewLine.model_validate_json(text))
        except ValidationError as e:
            raise validation_error(f"{path}:{number}", e) from None
    return lines


def _suite_of(run: RunFolder) -> str:
    for source in (run.results, run.config):
        if source.is_file():
            suite = read_json(source).get("suite")
            if isinstance(suite, str) and suite:
                return suite
    raise InputError(str(run.root), None, f"not a run folder: no {run.RESULTS} or {run.CONFIG} naming its suite")


def cascade_whatif(runs: list[Path]) -> CascadeWhatIf:
    """Replay the gate over every reviewed step of `runs` (each reviewed on every step, not by a cascade)."""
    cells: dict[tuple[str, str], GateCell] = {}

    def cell(suite: str, kind: str) -> GateCell:
        return cells.setdefault((suite, kind), GateCell(suite=suite, kind=kind))

    not_reviewed = trials = 0
    per_suite: dict[str, set[str]] = defaultdict(set)
    for given in runs:
        run = RunFolder(given)
        if not run.trials_dir.is_dir():
            raise InputError(str(run.root), None, f"no {run.TRIALS}/ folder: not a run folder")
        suite = _suite_of(run)
        per_suite[suite].add(str(run.root))
        review_files = run.review_logs()
        if not review_files:
            raise InputError(str(run.root), None, f"no {TrialFolder.REVIEWS} under {run.TRIALS}/: the run was not "
                             "collected with a reviewer")
        for path in review_files:
            trials += 1
            for line in read_review_lines(path):
                if line.reviewer.startswith("cascade:"):
                    raise InputError(str(path), "reviewer", f"{line.reviewer!r}: the run was already gated; the "
                                     "what-if needs a run reviewed on every step")
                if line.skipped is not None:
                    not_reviewed += 1
                    continue
                kind = step_kind(line.hints, line.proposal)
                gated_out = kind == "read_only"
                for s, k in ((suite, kind), (suite, ALL), (ALL, kind), (ALL, ALL)):
                    cell(s, k).add(line, gated_out)
    order = [*sorted(per_suite), ALL]
    kinds = [*STEP_KINDS, ALL]
    ordered = [cell(s, k) for s in order for k in kinds]
    return CascadeWhatIf(runs=[str(r) for r in runs], cells=ordered, not_reviewed_steps=not_reviewed, trials=trials)


def whatif_rows(result: CascadeWhatIf) -> tuple[list[str], list[list[str]]]:
    """The table the terminal and the page show."""
    headers = ["suite", "step", "reviews", "skipped", "skipped %", "model calls", "calls saved", "REPLACE",
               "let through", "let through %"]
    rows = [
        [c.suite, c.kind, str(c.reviewed_steps), str(c.skipped_steps), f"{100 * c.saved_review_share:.1f}",
         str(c.reviewer_calls), str(c.calls_saved), str(c.replacements), str(c.replacements_let_through),
         f"{100 * c.missed_replacement_share:.1f}"]
        for c in result.cells
        if not (c.suite == ALL and len({x.suite for x in result.cells}) == 2)  # one suite: its rows are the total
    ]
    return headers, rows
