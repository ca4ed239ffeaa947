"""The `retrosynthesis` suite: USPTO-style single-step retrosynthesis, scored by RDKit exact match.

The student sees the product (atom maps removed, canonicalised, so a mapping cannot leak the reaction
centre) and the reaction type, and writes the reactants, dot-separated, to `answer.txt`. Without
`--data` it runs the built-in set (120 textbook reactions over the ten USPTO-50k classes, 80 train / 40
test); with `--data` it reads USPTO-50k CSVs (see `data.py`).
"""

from __future__ import annotations

import shlex
import warnings
from collections import defaultdict
from pathlib import Path

from unscaffold.benchmarks.base import Score, Suite, Task
from unscaffold.bounded import LimitExceeded, call_bounded, preload
from unscaffold.errors import InputError
from unscaffold.minimal_harness.sandbox.base import Sandbox, SandboxConfig, SandboxKind
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.outcomes import Outcome
from unscaffold.untrusted import REFUSED, UntrustedFileError, read_untrusted_text

from .chem import RDKIT_VERSION, score_answer
from .data import BUILTIN, Reaction, load_reactions

ANSWER = "answer.txt"
PRODUCT_FILE = "product.smi"
MAX_ANSWER_BYTES = 64 * 1024  # a reactant set is a few hundred characters
SCORE_TIMEOUT_S = 60.0
WORKDIR = "/workspace"
HERE = Path(__file__).resolve().parent
SPLIT_ORDER = ("train", "val", "test", None)
# The task text, with {kind} {product} {answer} {product_file} to fill in.
INSTRUCTION = (HERE / "instruction.txt").read_text(encoding="utf-8").removesuffix("\n")


def instruction(product: str, class_name: str | None) -> str:
    """The task text: the product section (reaction type as context, product SMILES) and the answer format."""
    kind = f"The reaction type is {class_name}.\n" if class_name else ""
    return INSTRUCTION.format(kind=kind, product=product, answer=ANSWER, product_file=PRODUCT_FILE)


class RetrosynthesisSuite(Suite):

    def __init__(self, data: Path | None = None) -> None:
        super().__init__(data)
        self.reactions: list[Reaction] = load_reactions(self.data or BUILTIN)
        self._by_id = {r.id: r for r in self.reactions}

    def reaction(self, task: Task) -> Reaction:
        try:
            return self._by_id[task.id]
        except KeyError:
            raise InputError("--tasks", None, f"unknown retrosynthesis task {task.id!r}") from None

    def tasks(self, split: str | None = None) -> list[Task]:
        """A split's tasks; None: every task. A reaction RDKit cannot parse is left out, with a warning
        naming its file, line and id."""
        if self.split_file is not None:
            return self.split_file_tasks(split)
        out, bad = [], []
        for r in self.reactions:
            if split and r.split != split:
                continue
            try:
                out.append(self.task_of(r))
            except InputError as e:
                bad.append(str(e))
        if bad:
            warnings.warn(f"left out {len(bad)} reaction(s): {bad[0]}" + (f" (and {len(bad) - 1} more)"
                                                                          if len(bad) > 1 else ""), stacklevel=2)
        return out

    def named_tasks(self, task_ids: list[str], split: str | None = None) -> list[Task]:
        """Only the named reactions are canonicalised (a 40,000-row split need not be, for a few tasks); one
        that RDKit cannot parse is an error naming its file, line and id."""
        wanted = set(task_ids)
        if self.split_file is not None:
            return [t for t in self.split_file_tasks(split) if t.id in wanted]
        return [self.task_of(r) for r in self.reactions if r.id in wanted and (not split or r.split == split)]

    def task_of(self, r: Reaction) -> Task:
        product = r.checked_gold().product
        return Task(id=r.id, instruction=instruction(product, r.class_name), split=r.split,
                    meta={"class": r.rclass, "reaction_type": r.class_name, "product": product})

    def data_tasks(self, task_ids: set[str]) -> dict[str, Task]:
        """Only the listed reactions are canonicalised (a split file over 50,000 rows names a few hundred)."""
        return {r.id: self.task_of(r) for r in self.reactions if r.id in task_ids}

    def splits(self) -> list[str | None]:
        if self.split_file is not None:
            return self.split_file_splits()
        present = {r.split for r in self.reactions}
        return [s for s in SPLIT_ORDER if s in present]

    def prepare(self, task: Task, trial_dir: Path, kind: SandboxKind, *, oracle: bool = False) -> SandboxConfig:
        workspace = trial_dir / "workspace"
        workspace.mkdir(parents=True, exist_ok=True)
        (workspace / PRODUCT_FILE).write_text(self.reaction(task).gold.product + "\n", encoding="utf-8")
        return SandboxConfig(kind=kind, workspace=workspace, workdir=WORKDIR if kind != "none" else None)

    def oracle_commands(self, task: Task) -> list[str]:
        return [f"printf '%s\\n' {shlex.quote(self.reaction(task).recorded_answer())} > {ANSWER}"]

    def score(self, task: Task, trial_dir: Path, sandbox: Sandbox, trajectory: Trajectory) -> Score:
        """Reads the answer from the workspace as hostile input (no link followed, size-limited) and scores
        it with RDKit in a child process: a crafted SMILES can crash RDKit, and must cost only this trial."""
        details = {"rdkit_version": RDKIT_VERSION, "class": self.reaction(task).rclass}
        try:
            text = read_untrusted_text(trial_dir / "workspace", ANSWER, MAX_ANSWER_BYTES)
        except UntrustedFileError as e:
            text = None
            if e.refused:
                return Score(reward=0.0, reason=str(e), details={**details, REFUSED: str(e)})
        preload(f"{__package__}.chem")  # this folder's scorer, also in a copy of it
        try:
            score = call_bounded(score_answer, text, self.reaction(task).gold, timeout_s=SCORE_TIMEOUT_S,
                                 what="RDKit scoring of answer.txt")
        except LimitExceeded as e:
            return Score(reward=0.0, reason=str(e), details=details, outcome=Outcome.VERIFIER_ERROR)
        score.details.update(details)
        return score

    def metrics(self, tasks: list[Task], rewards: dict[str, float]) -> dict[str, float]:
        """Pass@1 (percent) per reaction class, as USPTO-50k results are usually broken down."""
        by_class: dict[int, list[float]] = defaultdict(list)
        for t in tasks:
            rclass = self._by_id[t.id].rclass if t.id in self._by_id else None
            if rclass is not None and t.id in rewards:
                by_class[rclass].append(rewards[t.id])
        return {f"pass_at_1_class_{c}": round(100.0 * sum(v >= 1.0 - 1e-9 for v in vals) / len(vals), 4)
                for c, vals in sorted(by_class.items())}

    def describe(self) -> dict[str, str]:
        """String facts for results.json (metrics() only carries numbers): the RDKit version and the data."""
        return {"rdkit_version": RDKIT_VERSION, "data": str(self.data) if self.data else "built-in",
                "n_reactions": str(len(self.reactions))}

    def leak_markers(self, tasks: list[Task] | None = None) -> list[str]:
        """Task ids and gold answers: the canonical reactant sets and, for unmapped data, the recorded strings."""
        markers = set(super().leak_markers(tasks))
        wanted = {t.id for t in tasks} if tasks is not None else None
        for r in self.reactions:
            if wanted is not None and r.id not in wanted:
                continue
            try:
                markers.add(r.recorded_answer())
            except ValueError:
                continue
            if ":" not in r.reactants:
                markers.add(r.reactants)
        return sorted(markers)

