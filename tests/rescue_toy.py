"""The deterministic rescue toy as a command, for runs in other processes (`accelerate launch`).

Every rollout under the base harness scores 0 (1 for the tasks named in $RESCUE_TOY_BASE_PASSES,
comma-separated) and every rollout under the sibling `submit-guard` scores 1, whatever the policy wrote
(the suite's verifier still runs, and cleans up); everything else is `unscaffold` itself:
`python tests/rescue_toy.py rescue train ...`."""

from __future__ import annotations

import os

from unscaffold.cli import app
from unscaffold.rescue.environment import HarnessEnvironment

real_reward = HarnessEnvironment.get_reward


def toy_reward(self: HarnessEnvironment) -> float:
    task_id = self._task.id if self._task is not None else ""
    real_reward(self)
    if self.context.harness_name == "base":
        return 1.0 if task_id in os.environ.get("RESCUE_TOY_BASE_PASSES", "").split(",") else 0.0
    return 1.0 if self.context.harness_name == "submit-guard" else 0.0


if __name__ == "__main__":
    HarnessEnvironment.get_reward = toy_reward  # type: ignore[method-assign]
    app(prog_name="unscaffold")
