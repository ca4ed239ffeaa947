"""The state-based verifier: the changes the task asks for happened, nothing else changed, the answer is right.

Like AppWorld's evaluation it compares database states, not the student's words: the gold calls are
applied to a scratch copy of the initial world, and the student's final world must differ from the
initial one in exactly the same way. Rows the student created are compared without their new ids
(a created playlist may get any id; its songs must point at it)."""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from unscaffold.benchmarks.base import Score

from . import apps
from .template_kit import Outcome, apply_effects

Row = dict[str, Any]
Snapshot = dict[str, dict[tuple[Any, ...], Row]]
NEW = "<new>"


def read_world(path: Path) -> tuple[Snapshot, bool, Any]:
    """Every world table keyed by primary key, whether complete_task was called, and its answer."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT "
                                             "LIKE 'sqlite_%' ORDER BY name")]
        snapshot: Snapshot = {}
        for table in tables:
            if table in apps.BOOKKEEPING_TABLES:
                continue
            info = conn.execute(f"PRAGMA table_info({table})").fetchall()
            names = [c[1] for c in info]
            keys = [c[1] for c in sorted(info, key=lambda c: c[5]) if c[5]] or names
            rows = [dict(zip(names, r, strict=True)) for r in conn.execute(f"SELECT * FROM {table}")]
            snapshot[table] = {tuple(r[k] for k in keys): r for r in rows}
        done = conn.execute("SELECT answer FROM completion").fetchone()
    finally:
        conn.close()
    return snapshot, done is not None, json.loads(done[0]) if done and done[0] is not None else None


class Schema:
    """Primary keys and foreign keys of the world tables: what `changes` needs to blank out new ids."""

    def __init__(self, path: Path) -> None:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            self.fks = {t: {r[3]: r[2] for r in conn.execute(f"PRAGMA foreign_key_list({t})")} for t in tables}
            self.pks = {t: [c[1] for c in conn.execute(f"PRAGMA table_info({t})") if c[5]] for t in tables}
        finally:
            conn.close()

    def own_id(self, table: str) -> str | None:
        """The generated id column of a table (a single integer key that references nothing)."""
        keys = self.pks.get(table, [])
        return keys[0] if len(keys) == 1 and keys[0] not in self.fks.get(table, {}) else None


def changes(before: Snapshot, after: Snapshot, schema: Schema) -> Counter[str]:
    """The difference of two snapshots as a multiset of readable change lines, new ids blanked out."""
    added_keys = {t: set(after.get(t, {})) - set(before.get(t, {})) for t in after}
    out: Counter[str] = Counter()
    for table in sorted(set(before) | set(after)):
        old, new = before.get(table, {}), after.get(table, {})
        for key in sorted(set(old) - set(new), key=repr):
            out[f"{table} {_key(key)} deleted"] += 1
        for key in sorted(added_keys.get(table, ()), key=repr):
            out[f"{table} added {_canonical(table, new[key], schema, added_keys)}"] += 1
        for key in sorted(set(old) & set(new), key=repr):
            diff = {c: v for c, v in new[key].items() if old[key].get(c) != v}
            if diff:
                out[f"{table} {_key(key)} set {json.dumps(diff, sort_keys=True)}"] += 1
    return out


def _key(key: tuple[Any, ...]) -> str:
    return "#" + "/".join(str(k) for k in key)


def _canonical(table: str, row: Row, schema: Schema, added: dict[str, set[tuple[Any, ...]]]) -> str:
    """A created row without its own new id; references to other created rows become `<new>`."""
    out = {}
    for column, value in row.items():
        if column == schema.own_id(table):
            continue
        target = schema.fks.get(table, {}).get(column)
        if target is not None and (value,) in added.get(target, set()):
            value = NEW
        out[column] = value
    return json.dumps(out, sort_keys=True)


def answers_match(expected: Any, given: Any) -> bool:
    """Numbers within a cent, text without case or surrounding space; no answer when none is asked."""
    if expected is None:
        return given is None or (isinstance(given, str) and not given.strip())
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        try:
            value = float(str(given).replace("$", "").replace(",", "").strip())
        except ValueError:
            return False
        return math.isfinite(value) and abs(value - float(expected)) < 0.005 + 1e-9
    return str(given).strip().rstrip(".").casefold() == str(expected).strip().casefold()


def expected_world(initial: Path, outcome: Outcome) -> Snapshot:
    with tempfile.TemporaryDirectory(prefix="appworld-lite-gold-") as tmp:
        scratch = Path(tmp) / "gold.db"
        shutil.copyfile(initial, scratch)
        conn = apps.connect(str(scratch))
        try:
            apply_effects(conn, outcome.effects)
        finally:
            conn.close()
        return read_world(scratch)[0]


def verify(initial: Path, final: Path, outcome: Outcome, limit: int = 8) -> Score:
    """Score 1 only if complete_task was called, the answer matches and the state changes are exactly the gold's."""
    if not final.is_file():
        return Score(reward=0.0, reason=f"the world database is missing ({final.name})")
    try:
        after, completed, answer = read_world(final)
    except sqlite3.Error as e:
        return Score(reward=0.0, reason=f"the world database is unreadable: {e}")
    before = read_world(initial)[0]
    schema = Schema(initial)
    want = changes(before, expected_world(initial, outcome), schema)
    got = changes(before, after, schema)
    missing = sorted((want - got).elements())
    extra = sorted((got - want).elements())
    checks = {
        "task_completed": completed,
        "answer_matches": completed and answers_match(outcome.answer, answer),
        "expected_changes_made": not missing,
        "no_other_changes": not extra,
    }
    details = {"checks": checks, "answer": answer, "missing_changes": missing[:limit],
               "unexpected_changes": extra[:limit], "expected_change_count": sum(want.values())}
    failed = [name for name, ok in checks.items() if not ok]
    if not failed:
        return Score(reward=1.0, details=details)
    seen = {"expected_changes_made": f"missing {missing[0]}" if missing else "",
            "no_other_changes": f"unexpected {extra[0]}" if extra else "",
            "answer_matches": f"answered {str(answer)[:80]!r}" if completed else ""}
    said = "; ".join(seen[name] for name in failed if seen.get(name))
    return Score(reward=0.0, reason="failed: " + ", ".join(failed) + (f" ({said})" if said else ""), details=details)
