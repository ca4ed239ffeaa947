"""Split files: real data gets its train, validation and test tasks from a file the user (or the paper) names.

Two forms. JSON: `{"train": [...], "validation": [...], "test": [...]}` (any key may be missing; a
`comment` string is allowed). Text: a line `train:`, `validation:` or `test:` opens a section, every
other non-empty line is a task id of the open section, `#` starts a comment. An id listed twice, or one
the data does not have, is an error naming it. Test tasks are refused by everything that learns from
tasks (evolution, router validation, rescue training): `refuse_test_tasks` is the one check they share."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unscaffold.errors import InputError
from unscaffold.iojson import read_input_text, validation_error

SPLIT_NAMES = ("train", "validation", "test")
FORBIDDEN_SPLIT = "test"


class SplitFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    comment: str | None = Field(None, description="where the split comes from")
    train: list[str] = Field(default_factory=list)
    validation: list[str] = Field(default_factory=list)
    test: list[str] = Field(default_factory=list)

    def ids(self, split: str) -> list[str]:
        return list(getattr(self, split))

    def split_of(self) -> dict[str, str]:
        return {task_id: name for name in SPLIT_NAMES for task_id in self.ids(name)}

    def sizes(self) -> dict[str, int]:
        return {name: len(self.ids(name)) for name in SPLIT_NAMES}


def _parse_text(path: Path, text: str) -> dict[str, list[str]]:
    data: dict[str, list[str]] = {}
    section: str | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.endswith(":"):
            section = line[:-1].strip()
            if section not in SPLIT_NAMES:
                raise InputError(str(path), f"line {number}", f"unknown split {section!r} (splits: "
                                 f"{', '.join(SPLIT_NAMES)})")
            data.setdefault(section, [])
            continue
        if section is None:
            raise InputError(str(path), f"line {number}", f"task id {line!r} before any `train:`, `validation:` "
                             "or `test:` line")
        data[section].append(line)
    return data


def read_split_file(path: Path) -> SplitFile:
    """The file as written; ids listed twice (in one split or two) are refused here, unknown ids later."""
    path = Path(path)
    text = read_input_text(path, encoding="utf-8-sig")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError:
        raw = None if text.lstrip().startswith(("{", "[")) else _parse_text(path, text)
        if raw is None:
            raise InputError(str(path), None, "starts like JSON but is not valid JSON") from None
    if isinstance(raw, dict):  # ids may be numbers in JSON (SpreadsheetBench ids often are)
        raw = {k: [str(v) for v in vals] if isinstance(vals, list) else vals for k, vals in raw.items()}
    try:
        split_file = SplitFile.model_validate(raw)
    except ValidationError as e:
        raise validation_error(str(path), e) from None
    seen: dict[str, str] = {}
    for name in SPLIT_NAMES:
        for task_id in split_file.ids(name):
            if task_id in seen:
                where = name if seen[task_id] == name else f"{seen[task_id]} and {name}"
                raise InputError(str(path), name, f"task id {task_id!r} is listed twice ({where})")
            seen[task_id] = name
    return split_file


def check_known(path: Path, split_file: SplitFile, known: Iterable[str], skipped: dict[str, str]) -> None:
    """Every listed id must be a task of the data (a task the data has but could not read says why)."""
    have = set(known)
    for name in SPLIT_NAMES:
        for task_id in split_file.ids(name):
            if task_id in have:
                continue
            why = f" (the data has it but it was skipped: {skipped[task_id]})" if task_id in skipped else ""
            raise InputError(str(path), name, f"unknown task id {task_id!r}: not a task of the data{why}")


def refuse_test_tasks(task_splits: Iterable[tuple[str, str | None]], flag: str, who: str) -> None:
    """One check for everything that must never see a test task: raise naming the first one."""
    for task_id, split in task_splits:
        if split == FORBIDDEN_SPLIT:
            raise InputError(flag, None, f"{task_id} is a test task; test tasks never feed {who}")


def seeded_split(ids: list[str], sizes: dict[str, int], seed: int) -> SplitFile:
    """Shuffle the ids (sorted first, so the data's order does not matter) with `seed`, then cut them in the
    order train, validation, test."""
    unknown = sorted(set(sizes) - set(SPLIT_NAMES))
    if unknown:
        raise InputError("--sizes", None, f"unknown split {unknown[0]!r} (splits: {', '.join(SPLIT_NAMES)})")
    wanted = sum(sizes.values())
    if wanted > len(ids):
        raise InputError("--sizes", None, f"{wanted} tasks asked for, the data has {len(ids)}")
    order = sorted(set(ids))
    random.Random(seed).shuffle(order)
    cut, start = {}, 0
    for name in SPLIT_NAMES:
        n = sizes.get(name, 0)
        cut[name] = sorted(order[start:start + n])
        start += n
    return SplitFile(comment=f"seeded split: seed {seed}, sizes " +
                     ", ".join(f"{k}={sizes.get(k, 0)}" for k in SPLIT_NAMES) + f", from {len(order)} tasks",
                     **cut)


def parse_sizes(text: str) -> dict[str, int]:
    """`train=300,test=100` -> {"train": 300, "test": 100}."""
    sizes: dict[str, int] = {}
    for item in (p.strip() for p in text.split(",")):
        name, sep, value = item.partition("=")
        if not sep or not value.strip().isdigit():
            raise InputError("--sizes", None, f"{item!r}: expected SPLIT=N (e.g. train=300,test=100)")
        sizes[name.strip()] = int(value)
    return sizes


def guess_suite(folder: Path) -> str:
    """The suite whose real-data layout FOLDER has (the `data_marks` each suite folder declares)."""
    from unscaffold.suites import entries, reading

    found = [e.name for e in reading(folder)]
    if len(found) == 1:
        return found[0]
    if found:
        raise InputError(str(folder), None, f"suites {', '.join(found)} could each read this data; pass --suite")
    marks = ", ".join(m for e in entries() for m in e.declaration.data_marks)
    raise InputError(str(folder), None, f"cannot tell which suite reads this data (none of {marks}); pass --suite")
