"""All appworld_lite tasks, generated deterministically: every template gives three scenarios of three tasks.

A scenario is one template with three variants (other people, other sizes, other targets), as in
AppWorld where a scenario's tasks pass together or not at all (SGC). Scenarios 0 and 1 of each template
are `train`, scenario 2 is `test`: the split is by scenario, never inside one."""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass
from functools import lru_cache

from .prompt import task_message
from .template_kit import Instance, Template, evaluate
from .templates import TEMPLATES
from .world import World, WorldBuilder

SCENARIOS_PER_TEMPLATE = 3
TASKS_PER_SCENARIO = 3
TEST_SCENARIOS = frozenset({2})
SPLITS = ("train", "test")


@dataclass(frozen=True)
class LiteTask:
    id: str
    scenario: str
    split: str
    template: Template
    world: World
    instance: Instance
    instruction: str

    def commands(self, paging: str = "all") -> list[str]:
        """The reference solution through `execute` (`paging="first"`: the same, reading one page per list)."""
        return self.template.commands(self.instance.params, paging)


def build_task(template: Template, scenario_index: int, variant: int) -> LiteTask:
    scenario = f"{template.name}-{scenario_index}"
    task_id = f"{scenario}_{variant}"
    builder = WorldBuilder(random.Random(f"appworld_lite/{task_id}"))
    builder.noise()
    params = template.plant(builder)
    world = builder.build()
    conn = sqlite3.connect(":memory:")
    try:
        world.fill(conn)
        instance = evaluate(template, conn, params)
    finally:
        conn.close()
    split = "test" if scenario_index in TEST_SCENARIOS else "train"
    return LiteTask(id=task_id, scenario=scenario, split=split, template=template, world=world, instance=instance,
                    instruction=task_message(world.supervisor_dict(), template.task(params)))


@lru_cache(maxsize=1)
def catalog() -> dict[str, LiteTask]:
    """Task id -> task, in a fixed order (template, scenario, variant)."""
    tasks = [build_task(t, s, v) for t in TEMPLATES for s in range(SCENARIOS_PER_TEMPLATE)
             for v in range(1, TASKS_PER_SCENARIO + 1)]
    return {t.id: t for t in tasks}
