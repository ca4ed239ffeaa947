"""`unscaffold report`: the page is self-contained, shows the review timeline, and its filters work."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import CHROMIUM, EXAMPLES, HARBOR_EXAMPLES, HARBOR_REPLAY, needs_bwrap, rendered_dom
from unscaffold.pages.charts import bar_chart
from unscaffold.run.models import RunConfig
from unscaffold.run.report import write_report
from unscaffold.run.runner import run


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> Path:
    from tests.helpers import BWRAP

    if not BWRAP:
        pytest.skip("bubblewrap is not installed or not usable here")
    out = tmp_path_factory.mktemp("report") / "run"
    run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student=f"replay:{HARBOR_REPLAY}",
                  reviewer=f"replay:{EXAMPLES / 'replay' / 'harbor_reviewer.json'}",
                  knowledge=EXAMPLES / "hstar" / "harbor_k", out=out, concurrency=2))
    write_report(out)
    return out


@needs_bwrap
def test_page_is_self_contained_and_shows_replacements(collected: Path) -> None:
    html = (collected / "report.html").read_text()
    assert not re.search(r"""(?:src|href)=["']https?://""", html)  # nothing fetched from the network
    assert html.count('<section class="trial"') == 4
    assert html.count('data-decision="REPLACE"') == 2
    assert "proposal (not run)" in html and "replacement (ran)" in html
    assert "sed -i &#x27;s/    return a/    return b/&#x27; fib.py" in html  # the rejected proposal, escaped
    assert "components: memory:off-by-one" in html
    assert '<b>100.0%</b>' in html


def test_bar_chart_scales_to_maximum() -> None:
    svg = bar_chart("r", [("a", 0.5), ("b", 1.0)], maximum=1.0)
    assert 'width="130.0"' in svg and 'width="260.0"' in svg


@needs_bwrap
@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")
def test_filters_in_headless_chromium(collected: Path, tmp_path: Path) -> None:
    page = collected / "report.html"
    dom = rendered_dom(page, "decision=REPLACE", tmp_path)
    visible = re.findall(r'<section class="trial" data-task="([^"]+)"', dom)
    hidden = re.findall(r'<section class="trial hidden" data-task="([^"]+)"', dom)
    assert sorted(visible) == ["fix-fibonacci", "word-stats"]
    assert sorted(hidden) == ["csv-total", "hello-file"]
    assert '<span id="shown">2</span>' in dom
    dom = rendered_dom(page, "task=csv-total", tmp_path)
    assert re.findall(r'<section class="trial" data-task="([^"]+)"', dom) == ["csv-total"]
    assert '<span id="shown">1</span>' in dom
