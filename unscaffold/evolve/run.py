"""Entry point: set up the session, then evolve one shared h* or a sibling pool."""

from __future__ import annotations

from unscaffold.evolve.config import EvolveConfig
from unscaffold.evolve.pool import evolve_pool
from unscaffold.evolve.records import EvolveReport
from unscaffold.evolve.session import Session
from unscaffold.evolve.single import evolve_single


def evolve(config: EvolveConfig) -> EvolveReport:
    session = Session(config)
    return evolve_pool(session) if config.mode == "pool" else evolve_single(session)
