"""The run report: one self-contained HTML file people want to read.

Why one file with embedded images: a report gets mailed, attached to papers'
supplementary material and opened years later; it must need nothing beside it.
It shows the leaderboard with the auditor's views side by side, a breakdown by
every label, count confusion matrices, per-query-time curves for streaming
benchmarks, and a drill-down into every attempt down to its transcript.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from statebox.harness.aggregate import AgentDatasetScore
from statebox.harness.store import ResultRow
from statebox.recorder import read_events
from statebox.schema import Item

MAX_EVENTS_PER_ATTEMPT = 300
MAX_TEXT = 2000

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d2430;background:#fafbfc}
h1{margin-bottom:0}h2{margin-top:32px;border-bottom:2px solid #dde3ea;padding-bottom:4px}
.sub{color:#5b6675;margin-top:4px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:14px;background:#fff}
th,td{border:1px solid #dde3ea;padding:4px 8px;text-align:right}th{background:#eef2f6}
td.l,th.l{text-align:left}
.clean{color:#1a7f37}.suspicious{color:#9a6700;font-weight:600}.contaminated{color:#cf222e;font-weight:700}
details{background:#fff;border:1px solid #dde3ea;border-radius:6px;margin:6px 0;padding:6px 10px}
summary{cursor:pointer}
pre{white-space:pre-wrap;word-break:break-word;background:#f3f5f8;padding:6px;border-radius:4px;font-size:12px;margin:2px 0}
.ev{margin:2px 0}.kind{display:inline-block;min-width:110px;font-weight:600;font-size:12px;color:#445}
.ok{color:#1a7f37}.bad{color:#cf222e}
img{max-width:100%;border:1px solid #dde3ea;background:#fff}
.grid{display:flex;flex-wrap:wrap;gap:16px}
"""


def _e(text: Any) -> str:
    return html.escape(str(text))


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _leaderboard(scores: list[AgentDatasetScore]) -> str:
    out = [
        "<table id='leaderboard'><tr><th class=l>dataset</th><th class=l>agent</th><th class=l>metric</th>"
        "<th>score</th><th>95% CI</th><th>clean-only</th><th>voided</th><th>n</th><th class=l>audit</th>"
        "<th class=l>status</th><th>tokens</th><th>cost $</th><th>s/attempt</th><th>frames decoded</th><th>model-visible frames</th></tr>"
    ]
    for s in sorted(scores, key=lambda s: (s.dataset, -(s.report.metrics.get(s.headline) or 0.0))):
        m = s.headline
        ci = ((s.report.model_extra or {}).get("ci") or {}).get(m)
        audit = " ".join(
            f"<span class='{_e(k)}'>{_e(k)}:{v}</span>" for k, v in sorted(s.verdict_counts.items())
        )
        cats = ", ".join(f"{k}:{v}" for k, v in sorted(s.category_counts.items()))
        out.append(
            f"<tr><td class=l>{_e(s.dataset)}</td><td class=l><b>{_e(s.agent)}</b></td><td class=l>{_e(m)}</td>"
            f"<td><b>{_pct(s.report.metrics.get(m))}</b></td>"
            f"<td>{_pct(ci[0]) + '-' + _pct(ci[1]) if ci else '-'}</td>"
            f"<td>{_pct(s.clean.metrics.get(m)) if s.clean else '-'}</td><td>{_pct(s.voided.metrics.get(m))}</td>"
            f"<td>{s.n}</td><td class=l>{audit}{('<br><small>' + _e(cats) + '</small>') if cats else ''}</td>"
            f"<td class=l>{_e(', '.join(f'{k}:{v}' for k, v in sorted(s.status_counts.items())))}</td>"
            f"<td>{s.tokens}</td><td>{s.cost_usd:.4f}</td><td>{s.mean_duration_s:.1f}</td>"
            f"<td>{s.frames_decoded}</td><td>{s.frames_model}</td></tr>"
        )
    out.append("</table>")
    return "\n".join(out)


def _all_metrics(scores: list[AgentDatasetScore]) -> str:
    out = []
    for s in scores:
        cells = "".join(f"<td class=l>{_e(k)}</td><td>{'-' if v is None else f'{v:.4f}'}</td>" for k, v in s.report.metrics.items())
        out.append(f"<tr><td class=l>{_e(s.dataset)}</td><td class=l>{_e(s.agent)}</td>{cells}</tr>")
    return "<table><tr><th class=l>dataset</th><th class=l>agent</th><th class=l colspan=99>metrics (all attempts)</th></tr>" + "".join(out) + "</table>"


def _breakdowns(scores: list[AgentDatasetScore]) -> str:
    """One table per dataset: rows are `label=value` groups, columns the agents' headline metric."""
    by_dataset: dict[str, list[AgentDatasetScore]] = defaultdict(list)
    for s in scores:
        by_dataset[s.dataset].append(s)
    out = []
    for dataset, group in sorted(by_dataset.items()):
        keys = sorted({k for s in group for k in s.report.groups})
        if not keys:
            continue
        metric = group[0].headline
        head = "".join(f"<th>{_e(s.agent)}</th>" for s in group)
        out.append(f"<h3>{_e(dataset)} — {_e(metric)} by label</h3><table><tr><th class=l>group</th><th>n</th>{head}</tr>")
        for key in keys:
            n = next((s.report.groups[key].n for s in group if key in s.report.groups), 0)
            cells = "".join(
                f"<td>{_pct(s.report.groups[key].metrics.get(metric)) if key in s.report.groups else '-'}</td>" for s in group
            )
            out.append(f"<tr><td class=l>{_e(key)}</td><td>{n}</td>{cells}</tr>")
        out.append("</table>")
    return "\n".join(out)


def _parse_int(text: str) -> int | None:
    import re

    found = re.findall(r"-?\d+", text or "")
    return int(found[-1]) if found else None


def _confusions(rows: list[ResultRow], items: dict[str, dict[str, Item]]) -> str:
    """CP-Bench-style count confusion matrices for every count-answer dataset and agent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    groups: dict[tuple[str, str], list[tuple[int, int | None]]] = defaultdict(list)
    for r in rows:
        item = items.get(r.dataset, {}).get(r.item_id)
        if item is None or item.answer_type != "number":
            continue
        query = next((q for q in item.queries if q.index == r.query_index), None)
        target = query.target if query is not None and query.target is not None else item.target
        try:
            truth = int(float(target))
        except (TypeError, ValueError):
            continue
        groups[(r.dataset, r.agent)].append((truth, _parse_int(r.response)))
    imgs = []
    for (dataset, agent), pairs in sorted(groups.items()):
        truths = sorted({t for t, _ in pairs})
        if len(truths) < 2:
            continue
        lo, hi = min(truths), max(truths)
        preds = [p for _, p in pairs if p is not None]
        plo, phi = min([lo] + preds), max([hi] + preds)
        phi = min(phi, hi + 10)
        plo = max(plo, lo - 10)
        mat = np.zeros((hi - lo + 1, phi - plo + 2), dtype=int)  # last column: unparsed / out of range
        for t, p in pairs:
            col = (p - plo) if p is not None and plo <= p <= phi else mat.shape[1] - 1
            mat[t - lo, col] += 1
        fig, ax = plt.subplots(figsize=(0.45 * mat.shape[1] + 2, 0.45 * mat.shape[0] + 1.5))
        ax.imshow(mat, cmap="Blues")
        ax.set_yticks(range(mat.shape[0]), [str(v) for v in range(lo, hi + 1)])
        ax.set_xticks(range(mat.shape[1]), [str(v) for v in range(plo, phi + 1)] + ["?"])
        for (i, j), v in np.ndenumerate(mat):
            if v:
                ax.text(j, i, str(v), ha="center", va="center", fontsize=8)
        ax.set_ylabel("true count")
        ax.set_xlabel("answered count")
        ax.set_title(f"{dataset} · {agent}", fontsize=10)
        imgs.append(f"<div><img alt='confusion {_e(dataset)} {_e(agent)}' src='{_png(fig)}'></div>")
    return "<div class=grid>" + "".join(imgs) + "</div>" if imgs else "<p>No count questions in this run.</p>"


def _query_time_curves(rows: list[ResultRow], items: dict[str, dict[str, Item]]) -> str:
    """Streaming benchmarks: how the per-query score evolves with the query time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        item = items.get(r.dataset, {}).get(r.item_id)
        if item is None or not item.is_streaming:
            continue
        query = next((q for q in item.queries if q.index == r.query_index), None)
        if query is None or query.time is None or not r.metrics:
            continue
        value = r.metrics.get("gpa", next(iter(r.metrics.values())))
        if value is None:
            continue
        series[r.dataset][r.agent].append((query.time, float(value)))
    imgs = []
    for dataset, agents in sorted(series.items()):
        fig, ax = plt.subplots(figsize=(6, 3.2))
        times = sorted({t for pts in agents.values() for t, _ in pts})
        if not times:
            continue
        edges = [times[0] + (times[-1] - times[0]) * k / 6 for k in range(7)]
        for agent, pts in sorted(agents.items()):
            xs, ys = [], []
            for a, b in zip(edges, edges[1:]):
                sel = [v for t, v in pts if a <= t <= b]
                if sel:
                    xs.append((a + b) / 2)
                    ys.append(sum(sel) / len(sel))
            ax.plot(xs, ys, marker="o", label=agent)
        ax.set_xlabel("query time (s)")
        ax.set_ylabel("per-query score")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(dataset, fontsize=10)
        ax.legend(fontsize=8)
        imgs.append(f"<div><img alt='query-time {_e(dataset)}' src='{_png(fig)}'></div>")
    return "<div class=grid>" + "".join(imgs) + "</div>" if imgs else "<p>No streaming questions in this run.</p>"


def _transcript(attempt_dir: Path) -> str:
    events = read_events(attempt_dir)
    if not events:
        return "<p><i>no events recorded</i></p>"
    out = []
    for ev in events[:MAX_EVENTS_PER_ATTEMPT]:
        text = ev.text if len(ev.text) <= MAX_TEXT else ev.text[:MAX_TEXT] + f"… [{len(ev.text) - MAX_TEXT} more chars]"
        extra = ""
        if ev.kind.value == "frames":
            extra = _e(json.dumps(ev.data)[:400])
        out.append(
            f"<div class=ev><span class=kind>#{ev.seq} {_e(ev.kind.value)}</span>"
            f"{'<small> t=' + str(ev.time) + 's</small>' if ev.time is not None else ''}"
            f"{'<pre>' + _e(text) + '</pre>' if text else ''}{'<pre>' + extra + '</pre>' if extra else ''}</div>"
        )
    if len(events) > MAX_EVENTS_PER_ATTEMPT:
        out.append(f"<p><i>{len(events) - MAX_EVENTS_PER_ATTEMPT} more events in events.jsonl</i></p>")
    return "\n".join(out)


def _attempts(rows: list[ResultRow], items: dict[str, dict[str, Item]], run_dir: Path) -> str:
    out = []
    for r in rows:
        item = items.get(r.dataset, {}).get(r.item_id)
        query = next((q for q in item.queries if q.index == r.query_index), None) if item else None
        target = query.target if query is not None and query.target is not None else (item.target if item else None)
        value = r.metrics.get("correct")  # the scorer's per-query verdict
        correct = None if value is None else value >= 0.999
        mark = "" if correct is None else ("<span class=ok>✔</span>" if correct else "<span class=bad>✘</span>")
        findings = "".join(
            f"<li><b>{_e(f.get('category'))}</b> ({_e(f.get('severity'))}, event #{_e(f.get('event'))}): <code>{_e(str(f.get('quote', ''))[:300])}</code></li>"
            for f in r.findings
        )
        qtime = f" @ {query.time:.1f}s" if query is not None and query.time is not None else ""
        out.append(
            f"<details class=attempt><summary>{mark} <b>{_e(r.agent)}</b> · {_e(r.dataset)} · {_e(r.item_id)}"
            f" q{r.query_index}{qtime} e{r.epoch} · <span class='{_e(r.verdict)}'>{_e(r.verdict)}</span>"
            f" · {_e(r.status)}</summary>"
            f"<p><b>Question:</b> {_e(item.question if item else '?')}"
            f"{'<br><b>Choices:</b> ' + _e(' | '.join(item.choices)) if item and item.choices else ''}</p>"
            f"<p><b>Answer:</b> <code>{_e(r.response[:500])}</code> · <b>target:</b> <code>{_e(target)}</code>"
            f" · <b>metrics:</b> {_e(json.dumps(r.metrics))}</p>"
            f"<p><b>Status:</b> {_e(r.status)} {_e(r.reason)} · {r.duration_s:.1f}s · tokens {r.input_tokens + r.output_tokens}"
            f" · frames decoded {r.frames_decoded}, model-visible {r.frames_model}</p>"
            f"{'<p><b>Audit findings:</b></p><ul>' + findings + '</ul>' if findings else ''}"
            f"<details><summary>Transcript</summary>{_transcript(run_dir / 'attempts' / r.attempt_id)}</details>"
            "</details>"
        )
    return "\n".join(out)


def render_report(run_dir: Path, rows: list[ResultRow], scores: list[AgentDatasetScore], items_by_dataset: dict[str, list[Item]]) -> str:
    items = {ds: {i.id: i for i in its} for ds, its in items_by_dataset.items()}
    agents = sorted({r.agent for r in rows})
    flagged = sum(1 for r in rows if r.verdict != "clean")
    return f"""<!doctype html><html lang=en><head><meta charset=utf-8><title>statebox report · {_e(run_dir.name)}</title>
<style>{CSS}</style></head><body>
<h1>statebox report</h1>
<p class=sub>run <code>{_e(run_dir)}</code> · {len(rows)} attempts · agents: {_e(', '.join(agents))} · audit flags: {flagged}</p>
<h2>Leaderboard</h2>
<p class=sub>score = all attempts; clean-only = items whose attempts the auditor found clean; voided = attempts the policy voids (contaminated) answer nothing.</p>
{_leaderboard(scores)}
<h2>All metrics</h2>
{_all_metrics(scores)}
<h2>Breakdown by label</h2>
{_breakdowns(scores)}
<h2>Count confusion matrices</h2>
{_confusions(rows, items)}
<h2>Per-query-time curves (streaming)</h2>
{_query_time_curves(rows, items)}
<h2>Attempts</h2>
{_attempts(rows, items, run_dir)}
<script>
// #open=N opens the N-th attempt and its transcript; #focus=N also hides everything else
// (links into a report, and the screenshot test).
const m = location.hash.match(/^#(open|focus)=(\d+)$/);
if (m) {{
  const d = document.querySelectorAll('details.attempt')[Number(m[2])];
  if (d) {{
    d.open = true;
    d.querySelectorAll('details').forEach(x => x.open = true);
    if (m[1] === 'focus') {{
      for (const el of document.body.children) if (el !== d && el.tagName !== 'H1' && el.tagName !== 'SCRIPT') el.style.display = 'none';
    }}
  }}
}}
</script>
</body></html>
"""


def write_report(run_dir: Path, out: Path | None = None) -> tuple[Path, list[AgentDatasetScore], list[ResultRow]]:
    """Score the run's stored rows and write the HTML report; returns (path, scores, rows)."""
    from statebox.harness.aggregate import score_run
    from statebox.harness.plan import RunConfig, load_datasets
    from statebox.harness.store import open_existing

    run_dir = Path(run_dir)
    store = open_existing(run_dir)
    rows = store.rows()
    store.close()
    config = RunConfig.load(run_dir)
    items_by_dataset = {d.spec.label: d.items for d in load_datasets(config)}
    scores = score_run(rows, items_by_dataset)
    target = Path(out) if out else run_dir / "report.html"
    target.write_text(render_report(run_dir, rows, scores, items_by_dataset), encoding="utf-8")
    return target, scores, rows
