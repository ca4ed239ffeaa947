"""Every behaviour predicate a bank's detector may name (`predicate = "..."`), by name: each suite's, from
its folder. The one module that knows them all, so the predicates' shared code imports no suite."""

from __future__ import annotations

from unscaffold.behaviors.predicates import Predicate
from unscaffold.benchmarks.harbor import detectors as workspace_files
from unscaffold.benchmarks.retrosynthesis import detectors as retrosynthesis
from unscaffold.benchmarks.spreadsheet import detectors as spreadsheet
from unscaffold.offline.appworld_lite import detectors as app_worlds

SUITE_PREDICATES = (retrosynthesis.PREDICATES, app_worlds.PREDICATES, spreadsheet.PREDICATES,
                    workspace_files.PREDICATES)


def _merged() -> dict[str, Predicate]:
    out: dict[str, Predicate] = {}
    for table in SUITE_PREDICATES:
        clash = sorted(set(out) & set(table))
        if clash:
            raise ValueError(f"behaviour predicates named twice: {', '.join(clash)}")
        out.update(table)
    return out


PREDICATES: dict[str, Predicate] = _merged()
# The same behaviours judged from recorded evidence (what the commands did, in order, with which outcome),
# where a suite gives an evidence form; the others are read from the commands' text alike with or without it.
EVIDENCE_PREDICATES: dict[str, Predicate] = {name: p for table in (
    retrosynthesis.EVIDENCE, app_worlds.EVIDENCE, spreadsheet.EVIDENCE, workspace_files.EVIDENCE) for name, p in
    table.items()}
