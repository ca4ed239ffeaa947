"""`rescue train`'s metrics.html: numbers, settings, loss and reward, and "not trained" when nothing moved."""

from __future__ import annotations

import json
import re
from pathlib import Path

from unscaffold.rescue.plot import write_training_plot

LINES = [{"step": 1, "groups": 2, "rescued_groups": 2, "effective_group_rate": 0.0, "base_effective_group_rate": 0.0,
          "rescue_success_rate": 0.0, "rollouts": 16, "extra_rollout_pct": 100.0, "mean_reward": 0.0,
          "base_preferred_rate": 0.0, "base_undecided_rate": 1.0},
         {"step": 2, "groups": 2, "rescued_groups": 1, "effective_group_rate": 0.5, "base_effective_group_rate": 0.5,
          "rescue_success_rate": 0.25, "rollouts": 12, "extra_rollout_pct": 50.0, "mean_reward": 0.375,
          "base_preferred_rate": 0.5, "base_undecided_rate": 0.5}]


def test_the_page_shows_numbers_settings_loss_and_whether_anything_was_trained(tmp_path: Path) -> None:
    log = tmp_path / "trl_log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in [{"step": 1, "loss": 0.0, "reward": 0.0},
                                                          {"step": 2, "loss": 0.125, "reward": 0.375}]) + "torn\n")
    summary = {"method": "random", "suite": "retrosynthesis", "steps": 2, "rollouts": 28, "trained": False,
               "not_trained_reason": "no group had both a success and a failure", "notes": ["a <note>"]}
    page = write_training_plot(LINES, tmp_path / "metrics.html", summary, {"router": "random", "k": 8, "top_k": 4,
                                                                           "learning_rate": 1e-05}, log).read_text()
    text = re.sub(r"<[^>]+>", "|", page)
    assert "rescue GRPO: random on retrosynthesis" in text
    assert "not trained: no group had both a success and a failure; `compare` does not rank this run" in text
    assert "|optimiser steps||2|" in text and "|training rollouts||28|" in text and "a &lt;note&gt;" in page
    assert "|k||8|" in text and "|top_k||4|" in text and "|learning_rate||1e-05|" in text
    assert "|2||2||1||0.500||0.500||0.250||12||50.0||0.375|" in text  # the second step's row
    assert page.count("<svg") == 4 and "loss and reward (TRL&#x27;s log)" in page
    assert "<title>mean reward: 2 -> 0.375</title>" in page  # the reward curve's last point, named on hover


def test_a_trained_run_says_nothing_of_it_and_skips_absent_figures(tmp_path: Path) -> None:
    page = write_training_plot(LINES, tmp_path / "m.html", {"steps": 2, "trained": True}).read_text()
    assert "not trained" not in page and "<h2>settings</h2>" not in page
    assert page.count("<svg") == 3  # no TRL log: no loss chart
