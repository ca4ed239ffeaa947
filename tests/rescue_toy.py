"""The deterministic rescue toy as a command, for runs in other processes (`accelerate launch`).

Every rollout under the base harness scores 0 and every rollout under the sibling `submit-guard` scores 1,
whatever the policy wrote (the suite's verifier still runs, and cleans up); everything else is
`unscaffold` itself: `python tests/rescue_toy.py rescue train ...`."""

from __future__ import annotations

from unscaffold.cli import app
from unscaffold.rescue.environment import HarnessEnvironment

real_reward = HarnessEnvironment.get_reward


def toy_reward(self: HarnessEnvironment) -> float:
    real_reward(self)
    return 1.0 if self.context.harness_name == "submit-guard" else 0.0


if __name__ == "__main__":
    HarnessEnvironment.get_reward = toy_reward  # type: ignore[method-assign]
    app(prog_name="unscaffold")
