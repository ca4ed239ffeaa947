"""A synthetic model of rescue GRPO, to judge whether a pool is worth training with before spending GPUs.

Tasks have a root cause each and a base logit of success that rises as the policy learns. Each sibling
repairs two causes and breaks two (a little more harm than help on average): with `locality` 1 its
effect lands only on tasks of those causes, with 0 the same net effect spreads evenly over all tasks.
`complementarity` 1 gives the siblings different causes to repair, 0 makes them all repair the same
two. `nonstationarity` is the step-to-step drift of every sibling's effect, `improvement` how much the
policy's logit on a task rises when its trained group was effective, and `transfer` how much of that
carries back to the base harness when the group was sampled under siblings (1: all of it, 0: none;
same-harness groups are sampled under the base harness and always count in full). At transfer 0 a
sibling rescue can raise the effective group rate but never base-harness success: every method sees the
same base rollouts (common random numbers), so the sibling routers then end exactly where GRPO does.

Router quality is an input, not a result: `rule_precision` and `adaptive_precision` are the share of a
router's nearest validation tasks that truly share the task's root cause. The defaults (0.6, 0.85) are
chosen to sit inside the published rescue success ranges (rule 27-44%, adaptive 46-67%); the ordering
of rule against adaptive follows from them, not from the simulation.

Methods at equal rescue budgets (K rollouts per rescued group):

- `grpo`: K base rollouts, nothing else;
- `same_harness`: an all-fail group is re-sampled K times under the base harness;
- `random`: K siblings drawn at random; `rule`: the K siblings with the best success on the
  validation tasks judged most similar (measured once, before training; similar tasks share the
  cause with probability `rule_precision`); `adaptive`: the same judgement by several voters at
  `adaptive_precision`, re-anchored on the current policy every `reanchor_every` steps.

Figures per method: effective group rate (groups with both a success and a failure), rescue
success rate (rescued groups with any success), extra rollouts over plain GRPO, final base success."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from unscaffold.rescue.settings import Knobs

METHODS = ("grpo", "same_harness", "random", "rule", "adaptive")
SWEEP_VALUES = (0.0, 0.25, 0.5, 0.75, 1.0)


class MethodResult(BaseModel):
    effective_group_rate: float
    rescue_success_rate: float
    extra_rollout_pct: float
    final_base_success: float


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


class World:
    """Tasks, validation tasks and siblings drawn once per repeat; every method sees the same world."""

    def __init__(self, knobs: Knobs, rng: np.random.Generator) -> None:
        c, p = knobs.causes, knobs.siblings
        self.knobs = knobs
        self.cause = rng.integers(0, c, knobs.tasks)
        self.val_cause = rng.integers(0, c, knobs.validation_tasks)
        self.logit = rng.normal(knobs.base_logit, 1.0, knobs.tasks)
        self.val_logit = rng.normal(knobs.base_logit, 1.0, knobs.validation_tasks)
        local = np.zeros((p, c))
        for h in range(p):
            own = [h % c, (h + 1) % c]
            repairs = [cause if rng.random() < knobs.complementarity else popular
                       for cause, popular in zip(own, (0, 1), strict=True)]
            local[h, list(set(repairs))] += knobs.gain
            broken = rng.choice([x for x in range(c) if x not in repairs], size=2, replace=False)
            local[h, broken] -= knobs.harm
        spread = local.mean(axis=1, keepdims=True).repeat(c, axis=1)
        self.effect = knobs.locality * local + (1 - knobs.locality) * spread  # (sibling, cause)
        # task-by-sibling idiosyncrasy is locality too: it vanishes with it
        self.noise = rng.normal(0, 0.5 * knobs.locality, (knobs.tasks, p))
        self.val_noise = rng.normal(0, 0.5 * knobs.locality, (knobs.validation_tasks, p))

    def sibling_p(self, effect: np.ndarray, logit: np.ndarray, cause: np.ndarray, noise: np.ndarray) -> np.ndarray:
        return sigmoid(logit[:, None] + effect[:, cause].T + noise)


def run_method(method: str, world: World, rng: np.random.Generator, base_rng: np.random.Generator | None = None,
               drift_rng: np.random.Generator | None = None) -> MethodResult:
    """One method in one world. `base_rng` draws the base rollouts and `drift_rng` the drift: the same
    streams for every method, so methods differ only where they act differently."""
    kn = world.knobs
    base_rng = base_rng or rng
    drift_rng = drift_rng or rng
    logit, val_logit, effect = world.logit.copy(), world.val_logit.copy(), world.effect.copy()
    k, n = kn.k, kn.tasks
    groups = effective_groups = rescued = rescued_ok = 0
    table = None
    for step in range(kn.steps):
        if method in ("rule", "adaptive") and (table is None or (method == "adaptive"
                                                                 and step % kn.reanchor_every == 0)):
            p_val = world.sibling_p(effect, val_logit, world.val_cause, world.val_noise)
            table = rng.binomial(kn.validation_trials, p_val) / kn.validation_trials  # (val task, sibling)
        wins = base_rng.binomial(k, sigmoid(logit))
        trained_wins = wins.copy()
        under_siblings = np.zeros(n, dtype=bool)
        failed = np.flatnonzero(wins == 0)
        if method != "grpo" and len(failed):
            p_sib = world.sibling_p(effect, logit, world.cause, world.noise)
            for t in failed:
                if method == "same_harness":
                    w = int(rng.binomial(k, sigmoid(logit[t])))
                else:
                    chosen = route(method, int(t), world, table, rng)
                    w = int((rng.random(k) < p_sib[t, chosen]).sum())
                    under_siblings[t] = True
                trained_wins[t] = w
                rescued += 1
                rescued_ok += w > 0
        is_effective = (trained_wins > 0) & (trained_wins < k)
        groups += n
        effective_groups += int(is_effective.sum())
        gain = kn.improvement * is_effective * np.where(under_siblings, kn.transfer, 1.0)
        logit += gain
        val_logit += gain.mean()
        effect += drift_rng.normal(0, kn.nonstationarity, effect.shape)
    return MethodResult(
        effective_group_rate=effective_groups / groups,
        rescue_success_rate=rescued_ok / rescued if rescued else 0.0,
        extra_rollout_pct=100.0 * rescued / groups,
        final_base_success=float(sigmoid(logit).mean()),
    )


def route(method: str, t: int, world: World, table: np.ndarray | None, rng: np.random.Generator) -> np.ndarray:
    """The K siblings a router picks for task t (cycling when the pool is smaller than K)."""
    kn = world.knobs
    p = kn.siblings
    if method == "random":
        order = rng.permutation(p)
    else:
        assert table is not None
        precision = kn.rule_precision if method == "rule" else kn.adaptive_precision
        voters = 1 if method == "rule" else kn.voters
        points = np.zeros(p)
        for _ in range(voters):
            same = np.flatnonzero(world.val_cause == world.cause[t])
            other = np.flatnonzero(world.val_cause != world.cause[t])
            picks = [rng.choice(same) if rng.random() < precision and len(same) else rng.choice(other)
                     for _ in range(kn.neighbours)]
            score = table[picks].mean(axis=0) + rng.random(p) * 1e-6  # random tie-break
            points += p - np.argsort(np.argsort(-score))  # Borda
        order = np.argsort(-points)
    return order[np.arange(kn.k) % p]


def simulate(knobs: Knobs, seed: int = 0) -> dict[str, MethodResult]:
    """Every method averaged over `repeats` worlds; the same worlds for every method."""
    sums: dict[str, list[MethodResult]] = {m: [] for m in METHODS}
    for r in range(knobs.repeats):
        world = World(knobs, np.random.default_rng([seed, r]))
        for i, method in enumerate(METHODS):
            sums[method].append(run_method(method, world, np.random.default_rng([seed, r, i, 1]),
                                           np.random.default_rng([seed, r, 0]), np.random.default_rng([seed, r, 2])))
    return {m: MethodResult(**{f: float(np.mean([getattr(x, f) for x in results]))
                               for f in MethodResult.model_fields}) for m, results in sums.items()}


def ordering_holds(results: dict[str, MethodResult]) -> bool:
    """The published ordering of effective group rate: adaptive > same-harness > plain GRPO."""
    egr = {m: r.effective_group_rate for m, r in results.items()}
    return egr["adaptive"] > egr["same_harness"] > egr["grpo"]


class SweepPoint(BaseModel):
    value: float
    effective_group_rate: dict[str, float]
    ordering_holds: bool


class Simulation(BaseModel):
    seed: int
    knobs: Knobs
    methods: dict[str, MethodResult]
    ordering_holds: bool
    sweeps: dict[str, list[SweepPoint]]


SWEEPS = ("locality", "complementarity", "locality+complementarity")


def run_simulation(knobs: Knobs | None = None, seed: int = 0, sweep: tuple[str, ...] = SWEEPS) -> Simulation:
    """The default knobs, then each sweep (`a+b` moves both knobs together) with the others at default."""
    knobs = knobs or Knobs()
    methods = simulate(knobs, seed)
    sweeps = {}
    for knob in sweep:
        points = []
        for value in SWEEP_VALUES:
            res = simulate(knobs.model_copy(update=dict.fromkeys(knob.split("+"), value)), seed)
            points.append(SweepPoint(value=value, ordering_holds=ordering_holds(res),
                                     effective_group_rate={m: r.effective_group_rate for m, r in res.items()}))
        sweeps[knob] = points
    return Simulation(seed=seed, knobs=knobs, methods=methods, ordering_holds=ordering_holds(methods), sweeps=sweeps)
