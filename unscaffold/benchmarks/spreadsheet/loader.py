"""Real SpreadsheetBench folders: `dataset.json` plus one folder of workbooks per task.

Two namings exist: the original release (`{n}_{id}_input.xlsx` / `{n}_{id}_answer.xlsx`, usually three
test cases) and Verified (`1_{id}_init.xlsx` / `1_{id}_golden.xlsx`, one case, with `prompt.txt`).
Both have known quirks, handled here by pattern rather than by a list of ids: bare
`initial.xlsx` / `golden.xlsx`, files named with another task's id (task 42930 ships
`1_43930_golden.xlsx`), a space before the extension (`2_<id>_input .xlsx`), and instructions that
are only a non-breaking space (the task is kept as shipped, with a note). A task whose files cannot be
matched is skipped with its reason, never guessed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from unscaffold.errors import InputError

DATASET = "dataset.json"
INPUT_KINDS = ("input", "init", "initial")
GOLDEN_KINDS = ("answer", "golden")
_FILE = re.compile(r"^(?:(\d+)_(.+)_)?(input|init|initial|answer|golden)(\s*)\.xlsx$", re.IGNORECASE)


class TestCase(BaseModel):
    number: int
    input: Path
    golden: Path


class RealTask(BaseModel):
    id: str
    instruction: str
    instruction_type: str
    answer_position: str
    folder: Path
    spreadsheet_path: str
    cases: list[TestCase]
    notes: list[str] = Field(default_factory=list, description="naming quirks met while loading")


class Dataset(BaseModel):
    root: Path
    tasks: list[RealTask]
    skipped: dict[str, str] = Field(default_factory=dict, description="task id -> why it was left out")


def read_entries(root: Path) -> list[dict[str, Any]]:
    """dataset.json as a JSON list (the official form) or as JSON lines."""
    path = root / DATASET
    if not path.is_file():
        raise InputError(str(path), None, "file not found (a SpreadsheetBench folder has dataset.json)")
    text = path.read_text(encoding="utf-8-sig")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as e:
            raise InputError(str(path), None, f"neither JSON nor JSON lines: {e.msg} (line {e.lineno})") from None
    if isinstance(data, dict):
        data = data.get("data") or data.get("tasks") or [data]
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise InputError(str(path), None, "expected a list of task objects")
    return data


def task_folder(root: Path, entry: dict[str, Any], task_id: str) -> Path | None:
    """`spreadsheet_path` names the folder (or a file in it); `spreadsheet/<id>` is the fallback."""
    candidates = []
    raw = str(entry.get("spreadsheet_path") or "").strip()
    if raw:
        p = Path(raw)
        p = p if p.is_absolute() else root / p
        candidates += [p, p.parent] if p.suffix == ".xlsx" else [p]
    candidates += [root / "spreadsheet" / task_id, root / "spreadsheets" / task_id, root / task_id]
    return next((c for c in candidates if c.is_dir()), None)


def match_cases(folder: Path, task_id: str) -> tuple[list[TestCase], list[str]]:
    """Pair input and golden files per test case number; notes record each quirk that was needed."""
    found: dict[tuple[int, str], list[tuple[str, Path]]] = {}
    notes: list[str] = []
    for path in sorted(folder.iterdir()):
        m = _FILE.match(path.name)
        if not m or not path.is_file():
            continue
        if m.group(4):
            notes.append(f"{path.name!r}: a space before .xlsx")
        number = int(m.group(1)) if m.group(1) else 1
        side = "input" if m.group(3).lower() in INPUT_KINDS else "golden"
        found.setdefault((number, side), []).append((m.group(2) or "", path))
    cases = []
    for number in sorted({n for n, _ in found}):
        chosen: dict[str, Path] = {}
        for side in ("input", "golden"):
            options = found.get((number, side), [])
            exact = [p for file_id, p in options if file_id == task_id]
            if exact:
                chosen[side] = exact[0]
            elif len(options) == 1:
                file_id, chosen[side] = options[0]
                notes.append(f"case {number} {side}: {chosen[side].name} (" +
                             (f"named with id {file_id}" if file_id else "bare name") + ")")
        if len(chosen) == 2:
            cases.append(TestCase(number=number, input=chosen["input"], golden=chosen["golden"]))
        elif chosen:
            missing = "golden" if "input" in chosen else "input"
            notes.append(f"case {number}: no {missing} workbook; case left out")
    return cases, notes


def load_dataset(root: Path) -> Dataset:
    """Every task of the folder; tasks whose files cannot be found are listed in `skipped`."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(str(root), None, "not a folder (expected a SpreadsheetBench folder with dataset.json)")
    tasks, skipped = [], {}
    seen: set[str] = set()
    for i, entry in enumerate(read_entries(root)):
        task_id = str(entry.get("id", "")).strip()
        if not task_id:
            raise InputError(str(root / DATASET), f"{i}.id", "missing task id")
        if task_id in seen:
            raise InputError(str(root / DATASET), f"{i}.id", f"duplicate task id {task_id!r}")
        seen.add(task_id)
        folder = task_folder(root, entry, task_id)
        if folder is None:
            skipped[task_id] = f"no folder for spreadsheet_path {entry.get('spreadsheet_path')!r}"
            continue
        cases, notes = match_cases(folder, task_id)
        if not cases:
            skipped[task_id] = f"no matching input/golden workbooks in {folder}"
            continue
        raw = str(entry.get("instruction") or "")
        instruction = raw.strip()
        prompt = folder / "prompt.txt"
        if not instruction and prompt.is_file():
            instruction = prompt.read_text(encoding="utf-8", errors="replace").strip()
            notes.append("instruction read from prompt.txt")
        if not instruction and raw:  # shipped so (a lone non-breaking space): kept, as the benchmark scores it
            instruction = raw
            notes.append(f"instruction is only whitespace ({raw!r}) as shipped; the task is kept")
        position = str(entry.get("answer_position") or "").strip()
        if not instruction or not position:
            skipped[task_id] = "no instruction" if not instruction else "no answer_position"
            continue
        tasks.append(RealTask(
            id=task_id, instruction=instruction, answer_position=position, folder=folder,
            instruction_type=str(entry.get("instruction_type") or "Cell-Level Manipulation"),
            spreadsheet_path=str(entry.get("spreadsheet_path") or folder.relative_to(root)),
            cases=cases, notes=notes,
        ))
    if not tasks:
        first = next(iter(skipped.items()), None)
        reason = f" ({len(skipped)} skipped; task {first[0]}: {first[1]})" if first else ""
        raise InputError(str(root / DATASET), None, f"no usable tasks{reason}")
    return Dataset(root=root, tasks=tasks, skipped=skipped)
