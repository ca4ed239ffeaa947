"""The simulator's page: its settings, every method's numbers beside the published ones, and sweep charts whose
axis fits the curves, each curve named at its end and in the key, the numbers in a table under it."""

from __future__ import annotations

import re
from pathlib import Path

from unscaffold.pages.charts import axis, curve_chart
from unscaffold.rescue.settings import Knobs
from unscaffold.rescue.sim_page import simulation_page
from unscaffold.rescue.simulate import run_simulation


def test_the_axis_fits_the_data_with_round_gridlines() -> None:
    assert axis(0.665, 0.889) == (0.65, 0.9, 0.05)
    assert axis(0.5, 0.5) == (0.44, 0.56, 0.02)
    assert axis(0.0, 100.0) == (0.0, 100.0, 20.0)


def test_each_curve_is_named_at_its_end_and_in_the_key() -> None:
    svg = curve_chart("rate vs x", {"a": [(0, 0.7), (1, 0.8)], "b": [(0, 0.7), (1, 0.71)]}, "x", "rate")
    assert svg.count("<polyline") == 2 and svg.count("<circle") == 4
    assert len(re.findall(r">a</text>", svg)) == 2 and len(re.findall(r">b</text>", svg)) == 2  # end + key
    assert 'stroke-dasharray="6 3"' in svg  # the second curve is dashed as well as coloured
    assert [t for t in re.findall(r">([0-9.]+)</text>", svg)][:4] == ["0.7", "0.72", "0.74", "0.76"]


def test_the_page_has_settings_numbers_published_figures_and_one_table_a_sweep(tmp_path: Path) -> None:
    result = run_simulation(Knobs(steps=3, repeats=1), seed=0, sweep=("locality",))
    html = simulation_page(result, tmp_path / "simulation.html").read_text()
    assert "<td>locality</td><td class=num>0.8</td>" in html and "<td>seed</td><td class=num>0</td>" in html
    adaptive = result.methods["adaptive"]
    assert f"<td>adaptive</td><td class=num>{adaptive.effective_group_rate:.3f}</td><td class=num>79.38%</td>" in html
    assert "<td class=num>46-67%</td>" in html and "Learning from Sibling Harnesses" in html
    assert html.count("<svg") == 1 and html.count("<table>") == 3
    point = result.sweeps["locality"][0]
    assert f"<td>{point.value:g}</td><td class=num>{point.effective_group_rate['grpo']:.3f}</td>" in html
