"""A middleware hint in the collection report: readable sentences, the rule's patterns named and listed,
escaped, in a fold (not raw regular expressions in the text)."""

from __future__ import annotations

from unscaffold.run.report import hint_html

HINT = {"component_id": "check:justified_write",
        "evidence": "the proposed command matches /(?:echo|printf)\\b[^|;&\\n]*>>?\\s*(?:\\./)?answer\\.txt\\b/: "
                    "echo 'C<C' > answer.txt; no earlier command of the student matches /RunReactants|^forward_check /",
        "instruction": "Check the chosen set before writing it."}


def test_a_hint_reads_as_sentences_with_its_patterns_listed_escaped() -> None:
    assert hint_html(HINT) == (
        '<div class="hint"><b>hint check:justified_write</b>: Check the chosen set before writing it.<ul>'
        '<li>the proposed command matches <span class="re">pattern 1</span>: echo &#x27;C&lt;C&#x27; &gt; '
        'answer.txt</li><li>no earlier command of the student matches <span class="re">pattern 2</span></li></ul>'
        '<details><summary>patterns</summary><ol>'
        '<li><code>(?:echo|printf)\\b[^|;&amp;\\n]*&gt;&gt;?\\s*(?:\\./)?answer\\.txt\\b</code></li>'
        '<li><code>RunReactants|^forward_check </code></li></ol></details></div>')


def test_a_hint_without_patterns_has_no_fold() -> None:
    assert hint_html({"component_id": "check:turn_budget", "evidence": "this is turn 25 (budget note from turn 25)",
                      "instruction": ""}) == (
        '<div class="hint"><b>hint check:turn_budget</b><ul><li>this is turn 25 (budget note from turn 25)</li>'
        '</ul></div>')


def test_chart_labels_are_whole_and_the_label_column_fits_them() -> None:
    from unscaffold.behaviors.html import forest_chart
    from unscaffold.behaviors.stats import Interval
    from unscaffold.pages.charts import bar_chart

    label = "rescue-trained + h (adaptive) · runs/hs/rescue_h"
    svg = bar_chart("pass@1 per run (%)", [(label, 50.0), ("base + h", 25.0)], maximum=100.0)
    assert f">{label}</text>" in svg
    assert '<rect x="348"' in svg  # 7 px x 48 characters + 12: the bars start after the longest label
    long = "x" * 80
    svg = forest_chart("Δ pass@1", [(long, Interval(value=1.0, low=0.0, high=2.0))], -100.0, 100.0)
    assert f"<title>{long}</title>{'x' * 63}…</text>" in svg
