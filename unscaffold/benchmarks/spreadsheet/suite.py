"""`spreadsheet`: SpreadsheetBench-style tasks, built in (train/test) or from a real folder (`--data`).

The workspace holds `spreadsheets/{n}_{id}_input.xlsx`; the student writes `output/{n}_{id}_output.xlsx`.
Golden workbooks never enter it, nor the trial folder: real ones stay in the data folder, built-in
ones are written to a private temporary folder only while the trial is scored. `/task/task.json`
(read-only) repeats the task's fields, no answers, for the h* checks, which see no transcript.
"""

from __future__ import annotations

import json
import shlex
import shutil
import tempfile
from functools import cached_property
from pathlib import Path
from typing import Any

from unscaffold.benchmarks.base import Score, Suite, Task
from unscaffold.errors import InputError
from unscaffold.iojson import write_text_atomic
from unscaffold.minimal_harness.sandbox.base import Mount, Sandbox, SandboxConfig, SandboxKind
from unscaffold.minimal_harness.trajectory import Trajectory

from . import tasks as builtin
from .gold import answer_value_markers, coordinate_markers, gold_marker
from .intake import Refused, take_out
from .loader import Dataset, RealTask, load_dataset
from .recalc import Limits, engine_summary
from .scorer import score_cases

HERE = Path(__file__).resolve().parent
WORKDIR = "/workspace"
TASK_MOUNT = "/task"
SOLUTION_MOUNT = "/solution"  # real data only, and only for --student oracle: the golden files
SPLITS = ("train", "test")
# The task message, with {instruction} {spreadsheet_path} {instruction_type} {answer_position} {output_path} {each}.
INSTRUCTION = (HERE / "instruction.txt").read_text(encoding="utf-8").removesuffix("\n")


def input_name(task_id: str, case: int = 1) -> str:
    return f"{case}_{task_id}_input.xlsx"


def output_name(task_id: str, case: int = 1) -> str:
    return f"{case}_{task_id}_output.xlsx"


def render_instruction(task_id: str, instruction: str, instruction_type: str, answer_position: str,
                       cases: list[int]) -> str:
    """The task message: the benchmark's fields, with workspace paths for input and output."""
    if len(cases) == 1:
        spreadsheet_path = f"spreadsheets/{input_name(task_id, cases[0])}"
        output_path = f"output/{output_name(task_id, cases[0])}"
        each = ""
    else:
        spreadsheet_path = "spreadsheets/ (test cases " + ", ".join(input_name(task_id, n) for n in cases) + ")"
        output_path = "output/ (" + ", ".join(output_name(task_id, n) for n in cases) + ", one per input)"
        each = " Apply the same manipulation to every test case."
    return INSTRUCTION.format(instruction=instruction, spreadsheet_path=spreadsheet_path,
                              instruction_type=instruction_type, answer_position=answer_position,
                              output_path=output_path, each=each)


class SpreadsheetSuite(Suite):

    def __init__(self, data: Path | None = None) -> None:
        super().__init__(data)
        self.dataset: Dataset | None = load_dataset(self.data) if self.data else None

    @cached_property
    def built(self) -> dict[str, builtin.BuiltTask]:
        """The built-in tasks by id (generated once, in memory, in well under a second)."""
        return {t.id: t for t in builtin.all_tasks()}

    def real(self, task_id: str) -> RealTask | None:
        if self.dataset is None:
            return None
        return next((t for t in self.dataset.tasks if t.id == task_id), None)

    def skipped_tasks(self) -> dict[str, str]:
        return dict(self.dataset.skipped) if self.dataset is not None else {}

    def splits(self) -> list[str | None]:
        if self.split_file is not None:
            return self.split_file_splits()
        return [None] if self.dataset else list(SPLITS)

    def tasks(self, split: str | None = None) -> list[Task]:
        """Real tasks when --data is given, else the built-in ones of the split (None: both); with a split
        file, its splits."""
        if self.split_file is not None:
            return self.split_file_tasks(split)
        if self.dataset is not None:  # real data without a split file: every task belongs to any split asked for
            return [self._task(t.id, t.instruction, t.instruction_type, t.answer_position,
                               [c.number for c in t.cases], None,
                               {"source": "spreadsheetbench", "notes": t.notes}) for t in self.dataset.tasks]
        if split is not None and split not in SPLITS:
            raise InputError("--split", None, f"the built-in spreadsheet tasks have the splits train and test, "
                             f"not {split!r}")
        return [self._task(t.id, t.instruction, t.instruction_type, t.answer_position, [1], t.split,
                           {"source": "built-in", "family": t.family, "features": list(t.features),
                            "prefilled": t.prefilled})
                for t in self.built.values() if split is None or t.split == split]

    def _task(self, task_id: str, instruction: str, instruction_type: str, answer_position: str,
              cases: list[int], split: str | None, meta: dict[str, Any]) -> Task:
        meta.update({"instruction": instruction, "instruction_type": instruction_type, "cases": cases,
                     "answer_position": answer_position})
        return Task(id=task_id, split=split, meta=meta,
                    instruction=render_instruction(task_id, instruction, instruction_type, answer_position, cases))

    def prepare(self, task: Task, trial_dir: Path, kind: SandboxKind, *, oracle: bool = False) -> SandboxConfig:
        """Inputs under canonical names in `spreadsheets/`, an empty `output/`, the task file at /task."""
        workspace = trial_dir / "workspace"
        (workspace / "spreadsheets").mkdir(parents=True, exist_ok=True)
        (workspace / "output").mkdir(exist_ok=True)
        real = self.real(task.id)
        mounts = [Mount(source=trial_dir / "task", target=TASK_MOUNT)]
        if real is None:
            builtin.write_workbook(self.built[task.id].inputs, workspace / "spreadsheets" / input_name(task.id))
        else:
            for case in real.cases:
                shutil.copyfile(case.input, workspace / "spreadsheets" / input_name(task.id, case.number))
            if oracle:
                mounts.append(Mount(source=real.folder, target=SOLUTION_MOUNT))
        fields = {k: task.meta[k] for k in ("instruction", "instruction_type", "answer_position")}
        fields.update({
            "id": task.id,
            "inputs": [f"spreadsheets/{input_name(task.id, n)}" for n in task.meta["cases"]],
            "outputs": [f"output/{output_name(task.id, n)}" for n in task.meta["cases"]],
        })
        write_text_atomic(trial_dir / "task" / "task.json", json.dumps(fields, indent=2) + "\n", durable=False)
        return SandboxConfig(kind=kind, workspace=workspace, workdir=None if kind == "none" else WORKDIR,
                             mounts=mounts, network=False)

    def oracle_commands(self, task: Task) -> list[str]:
        """Built-in: inspect, solve, verify. Real data has no solution code: the golden files are copied."""
        real = self.real(task.id)
        if real is None:
            return builtin.oracle_commands(self.built[task.id], f"spreadsheets/{input_name(task.id)}",
                                           f"output/{output_name(task.id)}")
        copies = [f"cp {shlex.quote(f'{SOLUTION_MOUNT}/{case.golden.name}')} "
                  f"{shlex.quote(f'output/{output_name(task.id, case.number)}')}" for case in real.cases]
        return ["mkdir -p output && " + " && ".join(copies)]

    def golden_paths(self, task: Task, private: Path) -> list[tuple[int, Path]]:
        """(case number, golden workbook): real ones stay in the data folder, built-in ones are
        written to `private`, a folder of the scorer's own that no student can reach."""
        real = self.real(task.id)
        if real is not None:
            return [(case.number, case.golden) for case in real.cases]
        path = private / "gold" / f"1_{task.id}_golden.xlsx"
        path.parent.mkdir(exist_ok=True)
        builtin.write_workbook(self.built[task.id].golden, path)
        return [(1, path)]

    def score(self, task: Task, trial_dir: Path, sandbox: Sandbox, trajectory: Trajectory) -> Score:
        """Compare the answer range of each output with its golden workbook on the host. Each output is
        copied out of the workspace first, following no link and within the size limit (intake.py), alone
        into a folder of its own; built-in goldens live in another private folder only while scoring, so
        no relative path in a workbook leads from a copy to a golden."""
        limits = Limits()
        with tempfile.TemporaryDirectory(prefix="unscaffold-score-") as tmp:
            private = Path(tmp)
            cases: list[tuple[Path, Path | Refused, str]] = []
            for n, golden in self.golden_paths(task, private):
                relative = f"output/{output_name(task.id, n)}"
                copy = take_out(trial_dir / "workspace", relative, private / f"output-{n}" / output_name(task.id, n),
                                limits.file_bytes)
                cases.append((golden, copy, relative))
            return score_cases(cases, task.meta["answer_position"], limits=limits)

    def describe(self) -> dict[str, str]:
        """For results.json: where the tasks come from and which engine recalculates formulas."""
        return {"data": str(self.data) if self.data else "built-in", "scoring_engine": engine_summary()}

    def leak_markers(self, tasks: list[Task] | None = None) -> list[str]:
        """Task ids and the distinctive gold values the student has to work out (not copied from the
        input; gold.py says which), of `tasks` (None: every task). Real tasks add their answer-cell
        coordinates; their workbooks are read only for the tasks named (None: ids only, since reading
        every golden workbook of a real folder takes minutes)."""
        markers = set(super().leak_markers(tasks))
        if self.dataset is not None:
            for task in tasks or []:
                real = self.real(task.id)
                if real is None:
                    continue
                markers |= coordinate_markers(real.answer_position)
                for case in real.cases:
                    markers |= answer_value_markers(case.golden, case.input, real.answer_position)
            return sorted(markers)
        wanted = {t.id for t in tasks} if tasks is not None else None
        for t in self.built.values():
            if wanted is not None and t.id not in wanted:
                continue
            visible = {gold_marker(v) for s in t.inputs for v in s.cells.values()}  # in the input: no secret
            for sheet, coord in t.answer_cells():
                marker = gold_marker(t.golden_value(sheet, coord))
                if marker and marker not in visible:
                    markers.add(marker)
        return sorted(markers)


