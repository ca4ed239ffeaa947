"""`rescue simulate --out DIR`: `simulation.html`, the simulator's result at the level of the collection
report: the settings it ran with, every method's numbers beside the published figures, and each sweep as a
chart whose axis fits its curves, every curve labelled at its end and keyed by colour and dash, with the
numbers in a table under it."""

from __future__ import annotations

from html import escape
from pathlib import Path

from unscaffold.iojson import write_text_atomic
from unscaffold.pages.charts import curve_chart
from unscaffold.pages.document import page, table_html
from unscaffold.rescue.simulate import Simulation

# Harness-S (AppWorld) figures a method of the simulator stands for; None: the paper gives none.
PUBLISHED = {"grpo": "64.69%", "same_harness": "70.94%", "random": None, "rule": None, "adaptive": "79.38%"}
PUBLISHED_SUCCESS = {"random": "18-25%", "rule": "27-44%", "adaptive": "46-67%"}
def simulation_page(result: Simulation, path: Path) -> Path:
    """The whole page: settings, the methods' numbers with the published ones, one chart and table a sweep."""
    knobs = result.knobs.model_dump()
    settings = table_html(["setting", "value"], [["seed", str(result.seed)]]
                      + [[k, f"{v:g}" if isinstance(v, float) else str(v)] for k, v in knobs.items()])
    methods = table_html(
        ["method", "effective group rate", "published", "rescue success", "published", "extra rollouts %",
         "final base success"],
        [[m, f"{r.effective_group_rate:.3f}", PUBLISHED.get(m) or "-", f"{r.rescue_success_rate:.3f}",
          PUBLISHED_SUCCESS.get(m, "-"), f"{r.extra_rollout_pct:.1f}", f"{r.final_base_success:.3f}"]
         for m, r in result.methods.items()])
    sections = []
    for knob, points in result.sweeps.items():
        names = list(points[0].effective_group_rate) if points else []
        series = {m: [(p.value, p.effective_group_rate[m]) for p in points] for m in names}
        chart = curve_chart(f"effective group rate as {knob} moves", series, knob, "effective group rate")
        rows = [[f"{p.value:g}", *[f"{p.effective_group_rate[m]:.3f}" for m in names],
                 "holds" if p.ordering_holds else "BREAKS"] for p in points]
        sections.append(f"<h2>{escape(knob)}</h2>{chart}"
                        + table_html([knob, *names, "adaptive > same_harness > grpo"], rows))
    ordering = "holds" if result.ordering_holds else "BREAKS"
    write_text_atomic(path, page("rescue simulator", (
        "<h1>rescue simulator</h1>"
        "<p class='muted'>Synthetic success probabilities, not training: a check of whether a sibling pool with "
        "these properties would pay before spending GPUs on it. Published figures: Harness-S, <i>Learning from "
        "Sibling Harnesses for Generalizable Agent Training</i> (AppWorld); the simulator's router quality and "
        "transfer are its inputs, so rule against adaptive follows from them.</p>"
        f"<h2>settings</h2>{settings}<h2>methods at these settings</h2>{methods}"
        f"<p>ordering adaptive &gt; same_harness &gt; grpo at these settings: <b>{ordering}</b></p>"
        + "".join(sections))))
    return path
