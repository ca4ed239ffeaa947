"""`--pool N` (Harness-S): directional evolution of sibling banks from the base.

Each round, parents are chosen to maximise joint coverage of the train split; the analyst groups a
parent's failures into causes and the causes into small related groups; the editor makes one child per
group. Every executable child joins the pool. The pool is then measured: locality (repairs and
regressions of each child against its parent), complementarity (one sample under each sibling against
N samples of the base, equal budget) and the pairwise overlap of the siblings' repairs."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

from pydantic import BaseModel

from unscaffold.errors import ModelError
from unscaffold.evolve.accounting import delta
from unscaffold.evolve.budget import BudgetExhausted
from unscaffold.evolve.failures import passed
from unscaffold.evolve.poolfile import BASE, PoolFile, Sibling, write_pool
from unscaffold.evolve.records import EvolveReport, Overlap, PoolMetrics, RoundRecord, SiblingMetrics
from unscaffold.evolve.session import Session
from unscaffold.iojson import write_json_atomic

POOL_FILE = "pool.toml"
METRICS = "pool_metrics.json"


class Member(BaseModel):
    name: str
    bank: str
    parent: str | None
    causes: list[str]
    rewards: dict[str, float]
    runs: list[str]

    def solved(self) -> set[str]:
        return {t for t, r in self.rewards.items() if passed(r)}


def choose_parents(members: list[Member], k: int) -> list[Member]:
    """Greedy maximum coverage: each next parent adds the most train tasks not yet solved by the chosen
    ones (ties: the earlier member); members that solve everything have nothing to repair."""
    chosen: list[Member] = []
    covered: set[str] = set()
    candidates = [m for m in members if len(m.solved()) < len(m.rewards)]
    while candidates and len(chosen) < k:
        best = max(candidates, key=lambda m: len(m.solved() - covered))
        if chosen and not best.solved() - covered:
            break
        chosen.append(best)
        covered |= best.solved()
        candidates.remove(best)
    return chosen


def jaccard_overlap(repairs: dict[str, set[str]]) -> list[Overlap]:
    out = []
    for a, b in combinations(repairs, 2):
        shared, union = len(repairs[a] & repairs[b]), len(repairs[a] | repairs[b])
        out.append(Overlap(a=a, b=b, shared=shared, union=union, jaccard=round(shared / union, 4) if union else 0.0))
    return out


def pool_metrics(session: Session, base: Member, children: list[Member]) -> PoolMetrics:
    by_name = {base.name: base, **{c.name: c for c in children}}
    n = len(children)
    samples = session.evaluator.evaluate(f"base-x{n}", session.base_bank(), session.task_ids, trials=n)
    base_cover = {t for t, rs in samples.items() if any(passed(r) for r in rs)}
    siblings = []
    for c in children:
        d = delta(by_name[c.parent or BASE].rewards, c.rewards)
        siblings.append(SiblingMetrics(name=c.name, parent=c.parent or BASE, causes=c.causes, repairs=d.repaired,
                                       regressions=d.regressed, base_repairs=sorted(c.solved() - base.solved()),
                                       solved=len(c.solved())))
    return PoolMetrics(
        tasks=len(session.task_ids), siblings=siblings,
        sibling_coverage=len(set().union(*(c.solved() for c in children))), base_coverage=len(base_cover),
        base_samples=n, base_single=len(base.solved()),
        overlap=jaccard_overlap({s.name: set(s.base_repairs) for s in siblings}),
    )


def evolve_pool(session: Session) -> EvolveReport:
    config, report = session.config, session.report
    base_path = session.base_bank()
    children: list[Member] = []
    try:
        base = Member(name=BASE, bank=str(base_path), parent=None, causes=[], rewards=session.measure(BASE, base_path),
                      runs=[BASE])
        for r in range(1, config.rounds + 1):
            if len(children) >= config.pool_size:
                break
            for parent in choose_parents([base, *children], config.parents):
                if len(children) >= config.pool_size:
                    break
                children += expand(session, r, parent, len(children))
    except (BudgetExhausted, ModelError) as e:  # stop cleanly; a re-run resumes
        report.stopped = str(e)
    if children:
        report.pool = pool_metrics(session, base, children) if report.stopped is None else None
        pool = PoolFile(name=f"{config.suite.replace('_', '-')}-evolved", suite=config.suite, base=str(base_path),
                           siblings=[Sibling(name=c.name, parent=c.parent or BASE, repairs=c.causes,
                                                 bank=f"banks/{c.name}") for c in children])
        write_pool(config.out / POOL_FILE, pool, f"Frozen pool evolved from {config.base} on the {config.split} "
                   f"split.\nMeasured locality, complementarity and overlap: {METRICS}")
        report.pool_file = str(config.out / POOL_FILE)
        if report.pool is not None:
            write_json_atomic(config.out / METRICS, report.pool.model_dump(mode="json"))
    session.save()
    return report


def expand(session: Session, r: int, parent: Member, existing: int) -> list[Member]:
    """One parent's step of a round: analyse its failures, then one child per group of related causes."""
    config, report = session.config, session.report
    failing = [t for t in session.task_ids if not passed(parent.rewards[t])]
    record = RoundRecord(round=r, parent=parent.name, failing=failing, status="no_failures",
                         solved_before=len(parent.solved()), tasks=len(session.task_ids))
    report.rounds.append(record)
    if not failing:
        session.save()
        return []
    failures = session.failures(parent.runs, parent.rewards)
    analysis, errors = session.steps.analyse(f"r{r}.{parent.name}.analyst", failures)
    record.errors = errors
    if analysis is None or not analysis.causes:
        record.status = "no_analysis" if analysis is None else "no_patchable_cause"
        record.single_task_failures = [s.task for s in analysis.single_task_failures] if analysis else []
        session.save()
        return []
    report.rounds.pop()
    out: list[Member] = []
    for g, group in enumerate(analysis.groups, 1):
        if existing + len(out) >= config.pool_size:
            break
        name = f"sib-{existing + len(out) + 1:02d}"
        step = record.model_copy(update={"causes": list(group), "errors": list(errors),
                                         "single_task_failures": [s.task for s in analysis.single_task_failures]})
        report.rounds.append(step)
        causes = [analysis.cause(c) for c in group]
        edit, edit_errors = session.steps.edit(f"r{r}.{parent.name}.editor.{g}", Path(parent.bank), causes,
                                               session.banks / name)
        step.errors += edit_errors
        if edit is None:
            step.status = "edit_rejected"
            session.save()
            continue
        step.child, step.status = name, "joined_pool"
        step.targeted = sorted({t for c in edit.causes for t in analysis.cause(c).tasks})
        bank = (session.banks / name).resolve()
        after, runs = session.measure_child(name, bank, step.targeted)
        d = delta(parent.rewards, after)
        step.repaired, step.regressed, step.still_failing, step.solved_after = (d.repaired, d.regressed,
                                                                                d.still_failing, d.solved)
        out.append(Member(name=name, bank=str(bank), parent=parent.name, causes=list(edit.causes), rewards=after,
                          runs=runs))
        session.save()
    return out
