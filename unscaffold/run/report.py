"""`unscaffold report RUN_DIR`: one self-contained HTML page to look at a run.

Summary with plots (inline SVG, no network), then per trial a timeline: each step shows what ran and,
for a reviewed step, the decision; a REPLACE shows the proposal beside its replacement, the reason and
the components used. Filters by task, decision and outcome run in the page itself."""

from __future__ import annotations

import json
import re
from collections import Counter
from html import escape
from pathlib import Path
from typing import Any

from unscaffold.iojson import read_json, write_text_atomic
from unscaffold.pages.charts import bar_chart
from unscaffold.pages.document import cards_html, page
from unscaffold.run.folder import RunFolder, TrialFolder
from unscaffold.sft.build import read_reviews

OBSERVATION_CHARS = 1500

REPORT_CSS = """
.filters{position:sticky;top:0;background:#fafbfc;padding:8px 0;border-bottom:1px solid #dde2ea;z-index:2}
.filters label{margin-right:14px}
.trial{background:#fff;border:1px solid #dde2ea;border-radius:8px;margin:12px 0;padding:10px 14px}
.trial h3{margin:0;font-size:15px} .ok{color:#17803d} .bad{color:#b42318}
.step{border-top:1px solid #eef1f5;padding:8px 0}
.badge{display:inline-block;border-radius:4px;padding:0 6px;font-size:12px;font-weight:600;margin-right:6px}
.PASS{background:#e3f4e8;color:#17803d} .REPLACE{background:#fdecc8;color:#8a5300}
.SKIPPED{background:#eceff3;color:#556} .NONE{background:#eceff3;color:#556} .ERROR{background:#fde2e1;color:#b42318}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:10px} .pair h4{margin:2px 0;font-size:12px}
.reason{font-style:italic} .hidden{display:none}
.hint{color:#445;margin:4px 0} .hint ul{margin:2px 0 2px 18px;padding:0} .re{font-family:monospace;background:#eef}
"""

SCRIPT = """
function applyFilters(){
  const task=document.getElementById('f-task').value, dec=document.getElementById('f-decision').value,
        out=document.getElementById('f-outcome').value;
  document.querySelectorAll('.trial').forEach(t=>{
    let show=(task==='*'||t.dataset.task===task)&&(out==='*'||t.dataset.outcome===out);
    let anyStep=false;
    t.querySelectorAll('.step').forEach(s=>{
      const hit=dec==='*'||s.dataset.decision===dec; s.classList.toggle('hidden',!hit); anyStep=anyStep||hit;});
    if(dec!=='*'&&!anyStep) show=false;
    t.classList.toggle('hidden',!show);
  });
  document.getElementById('shown').textContent=document.querySelectorAll('.trial:not(.hidden)').length;
}
// Filters can be preset in the address, e.g. report.html#decision=REPLACE&outcome=failure
new URLSearchParams(location.hash.slice(1)).forEach((v,k)=>{
  const el=document.getElementById('f-'+k); if(el) el.value=v;});
document.querySelectorAll('select').forEach(s=>s.addEventListener('change',applyFilters));
applyFilters();
"""


def _response_html(response: dict[str, Any] | None, *, replacement: bool = False) -> str:
    if not response:
        return '<span class="muted">(none)</span>'
    parts = []
    if response.get("reasoning"):
        parts.append(f'<div class="muted">reasoning</div><pre>{escape(response["reasoning"])}</pre>')
    if response.get("content"):
        parts.append(f"<pre>{escape(response['content'])}</pre>")
    calls = [response["tool_call"]] if replacement and response.get("tool_call") else response.get("tool_calls") or []
    for c in calls:
        args = c.get("arguments")
        text = args.get("command") if isinstance(args, dict) and "command" in args else json.dumps(args)
        parts.append(f'<div class="muted">{escape(c.get("name", ""))}</div><pre>{escape(str(text))}</pre>')
    return "".join(parts) or '<span class="muted">(empty)</span>'


def _message_html(message: dict[str, Any]) -> str:
    calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
             for c in message.get("tool_calls") or []]
    return _response_html({"reasoning": message.get("reasoning_content"), "content": message.get("content"),
                           "tool_calls": calls})


# A middleware hint's evidence quotes the rule's patterns as `/PATTERN/`, closed by `: `, `; ` or the end.
_PATTERN = re.compile(r" /(.+?)/(?=: |; |$)")


def hint_html(hint: dict[str, Any]) -> str:
    """A middleware hint as a reader wants it: the component, its instruction, each piece of evidence on its
    own line with the rule's patterns named (`pattern 1`) and listed, escaped, in a fold below."""
    patterns: list[str] = []

    def name(m: re.Match[str]) -> str:
        patterns.append(m.group(1))
        return f" \x00{len(patterns)}\x00"

    marked = _PATTERN.sub(name, str(hint.get("evidence", "")))
    clauses = "".join(
        "<li>" + re.sub(r"\x00(\d+)\x00", r'<span class="re">pattern \1</span>', escape(clause)) + "</li>"
        for clause in marked.split("; ") if clause)
    listed = "".join(f"<li><code>{escape(p)}</code></li>" for p in patterns)
    fold = f"<details><summary>patterns</summary><ol>{listed}</ol></details>" if patterns else ""
    instruction = escape(str(hint.get("instruction") or ""))
    return (f'<div class="hint"><b>hint {escape(str(hint.get("component_id", "")))}</b>'
            f'{f": {instruction}" if instruction else ""}<ul>{clauses}</ul>{fold}</div>')


def _step_html(turn: int, message: dict[str, Any], observation: str | None, review: dict[str, Any] | None) -> str:
    decision = "NONE"
    if review:
        decision = "SKIPPED" if review.get("skipped") else review.get("decision", "NONE")
    head = f'<span class="badge {decision}">{decision}</span><b>turn {turn}</b>'
    body = []
    if review and decision == "REPLACE":
        body.append('<div class="pair"><div><h4>proposal (not run)</h4>'
                    f'{_response_html(review.get("proposal"))}</div><div><h4>replacement (ran)</h4>'
                    f'{_response_html(review.get("replacement"), replacement=True)}</div></div>')
    else:
        body.append(_message_html(message))
    if review and review.get("reason") and decision in ("REPLACE", "PASS", "ERROR"):
        body.append(f'<div class="reason">reason: {escape(review["reason"])}</div>')
    if review and review.get("components_used"):
        body.append(f'<div class="muted">components: {escape(", ".join(review["components_used"]))}</div>')
    for hint in (review or {}).get("hints") or []:
        body.append(hint_html(hint))
    if review and review.get("errors"):
        body.append(f'<div class="bad">invalid submissions: {escape("; ".join(review["errors"]))}</div>')
    if observation is not None:
        shown = observation if len(observation) <= OBSERVATION_CHARS else observation[:OBSERVATION_CHARS] + " ..."
        body.append(f'<div class="muted">observation</div><pre>{escape(shown)}</pre>')
    return f'<div class="step" data-decision="{decision}">{head}{"".join(body)}</div>'


def trial_html(trial_dir: Path) -> tuple[str, dict[str, Any]]:
    trial = TrialFolder(trial_dir)
    result = read_json(trial.result)
    traj = read_json(trial.trajectory) if trial.trajectory.exists() else {}
    reviews = {r.get("turn"): r for r in read_reviews(trial.reviews)}
    messages = traj.get("messages", [])
    steps = []
    for step in traj.get("steps", []):
        i = step["message_index"]
        follows = messages[i + 1] if i + 1 < len(messages) else None
        observation = follows["content"] if follows and follows["role"] == "tool" else None
        steps.append(_step_html(step["turn"], messages[i], observation, reviews.get(step["turn"])))
    success = result.get("reward", 0.0) >= 1.0 - 1e-9
    outcome = "success" if success else "failure"
    note = escape(result.get("exception") or result.get("reason") or "")
    task = messages[1]["content"] if len(messages) > 1 else ""
    html = (f'<section class="trial" data-task="{escape(result["task_id"])}" data-outcome="{outcome}">'
            f'<h3 class="{"ok" if success else "bad"}">{escape(result["trial_id"])} · reward {result["reward"]:.2f}'
            f' · {escape(result.get("exit_status", ""))}</h3>'
            f'<div class="muted">{result.get("turns", 0)} turns · {result.get("replacements", 0)} replaced · '
            f'{result.get("reviewer_calls", 0)} reviewer calls {("· " + note) if note else ""}</div>'
            f'<details><summary>task</summary><pre>{escape(task)}</pre></details>{"".join(steps)}</section>')
    return html, {"result": result, "decisions": Counter(
        ("SKIPPED" if r.get("skipped") else r.get("decision", "NONE")) for r in reviews.values())}


def render_report(run_dir: Path) -> str:
    run_dir = Path(run_dir)
    folder = RunFolder(run_dir)
    results = read_json(folder.results)
    trials, infos = [], []
    for trial in folder.finished_trials():
        html, info = trial_html(trial.root)
        trials.append(html)
        infos.append(info)
    decisions: Counter[str] = Counter()
    for info in infos:
        decisions.update(info["decisions"])
    tasks = sorted({i["result"]["task_id"] for i in infos})
    cards = [("pass@1", f"{results['pass_at_1']:.1f}%"), ("tasks", results["n_tasks"]), ("trials", results["n_trials"]),
             ("replacements", results.get("replacements", 0)), ("reviewer calls", results.get("reviewer_calls", 0)),
             ("calls saved", results.get("reviewer_calls_saved", 0)), ("cost", f"${results.get('cost_usd', 0):.4f}"),
             ("wall", f"{results.get('wall_time_s', 0):.1f}s")]
    for key in ("tgc", "sgc"):
        if key in results:
            cards.insert(1, (key.upper(), f"{results[key]:.1f}%"))
    tokens = results.get("tokens", {})
    plots = [
        bar_chart("reward per task", sorted(results["per_task"].items()), maximum=1.0),
        bar_chart("review decisions", sorted(decisions.items()), fmt="{:.0f}"),
        bar_chart("replacements per trial", sorted((i["result"]["trial_id"], float(i["result"].get("replacements", 0)))
                                                   for i in infos), fmt="{:.0f}"),
        bar_chart("tokens", [(f"{role} {kind}", float(v)) for role, d in tokens.items() for kind, v in d.items()],
                  fmt="{:.0f}"),
    ]
    options = "".join(f'<option value="{escape(t)}">{escape(t)}</option>' for t in tasks)
    return page(f"unscaffold run · {results['suite']}", f"""<h1>{escape(results['suite'])} run</h1>
<div class="muted">student {escape(results['student'])} · harness {escape(results.get('harness', ''))}
{(' · reviewer ' + escape(results['reviewer'])) if results.get('reviewer') else ''} · {escape(str(run_dir))}</div>
{cards_html(cards)}
<div class="plots">{''.join(plots)}</div>
<div class="filters">
<label>task <select id="f-task"><option value="*">all</option>{options}</select></label>
<label>decision <select id="f-decision"><option value="*">all</option><option>REPLACE</option><option>PASS</option>
<option>SKIPPED</option><option>NONE</option></select></label>
<label>outcome <select id="f-outcome"><option value="*">all</option><option value="success">success</option>
<option value="failure">failure</option></select></label>
<span class="muted"><span id="shown">{len(trials)}</span> of {len(trials)} trials shown</span></div>
<h2>Trials</h2>{''.join(trials)}""", css=REPORT_CSS, script=SCRIPT)


def write_report(run_dir: Path, out: Path | None = None) -> Path:
    out = Path(out) if out else RunFolder(run_dir).report
    write_text_atomic(out, render_report(run_dir))
    return out
