"""Harness-S: sibling-harness rescue RL (pool, routers, rescue groups, objective, simulator, trainer)."""
