"""The report's pictures, all inline SVG.

Why inline SVG: it is text in the page (works offline, scales, is searchable and testable
in the DOM) and costs nothing to draw; matplotlib took seconds per report (import and a
PNG per plot) and is no longer needed here.
Every function takes the bounded summary (agents x datasets), never the rows.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

from statebox.report.aggregate import AT_CEILING, NOT_ABOVE, TOO_FEW, AgentDatasetScore, best_priors, prior_outcome
from statebox.report.visible_text import visible_html
from statebox.schema import ScoreReport

FONT = "font-family='system-ui,-apple-system,Segoe UI,Roboto,sans-serif'"
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
VERDICT_COLOURS = {"clean": "#2da44e", "suspicious": "#d4a72c", "contaminated": "#cf222e"}
CATEGORY_COLOURS = ["#8250df", "#0969da", "#bc4c00", "#e85aad", "#1b7c83", "#6e7781", "#953800", "#4d2d8f"]  # never the verdict colours


def _e(text: Any) -> str:
    """Escaped for SVG text and attributes, every hidden character spelt <U+XXXX> (visible_text.py)."""
    return visible_html(text)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def headline_value(s: AgentDatasetScore, report: ScoreReport | None = None) -> float | None:
    value = (report or s.report).metrics.get(s.headline)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def score_ci(s: AgentDatasetScore) -> tuple[float, float] | None:
    ci = ((s.report.model_extra or {}).get("ci") or {}).get(s.headline)
    return (float(ci[0]), float(ci[1])) if ci else None


def agent_order(scores: list[AgentDatasetScore]) -> list[str]:
    """Best first: mean headline score over the datasets an agent answered."""
    means = agent_means(scores)

    def best_first(agent: str) -> tuple[float, str]:
        mean = means[agent]
        return (-(mean if mean is not None else -1.0), agent)

    return sorted(means, key=best_first)


def agent_means(scores: list[AgentDatasetScore]) -> dict[str, float | None]:
    vals: dict[str, list[float]] = defaultdict(list)
    seen: set[str] = set()
    for s in scores:
        seen.add(s.agent)
        v = headline_value(s)
        if v is not None:
            vals[s.agent].append(v)
    return {a: (sum(vals[a]) / len(vals[a]) if vals[a] else None) for a in seen}


def best_baselines(scores: list[AgentDatasetScore]) -> dict[str, tuple[float, str]]:
    """Per dataset, the best chance/prior baseline (`aggregate.best_priors`: the scorer's
    `random` and `frequency` baselines and every baseline agent that ran)."""
    return best_priors(scores)


def _blues(v: float) -> str:
    """0 -> pale, 1 -> deep blue (a perceptually ordered ramp, readable in grey)."""
    v = min(max(v, 0.0), 1.0)
    lo, hi = (247, 251, 255), (8, 48, 107)
    r, g, b = (round(lo[i] + (hi[i] - lo[i]) * v) for i in range(3))
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap_svg(scores: list[AgentDatasetScore], datasets: list[str]) -> str:
    """Agents x datasets: the headline score, with the clean-only value and voided count in each cell."""
    agents = agent_order(scores)
    cells = {(s.agent, s.dataset): s for s in scores}
    datasets = [d for d in datasets if any(k[1] == d for k in cells)]
    if not agents or not datasets:
        return "<svg id='heatmap' class='chart' width='400' height='40'><text x='8' y='24'>no attempts yet</text></svg>"
    means = agent_means(scores)
    label_w, cell_w, cell_h, head_h = 150, 124, 58, 46
    width = label_w + cell_w * (len(datasets) + 1) + 8
    height = head_h + cell_h * len(agents) + 30
    out = [f"<svg id='heatmap' class='chart' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
           f"viewBox='0 0 {width} {height}' {FONT} font-size='12' role='img' aria-label='score heatmap'>"]
    metric_of = {s.dataset: s.headline for s in scores}
    for j, d in enumerate(datasets + ["mean"]):
        x = label_w + j * cell_w + cell_w / 2
        out.append(f"<text x='{x}' y='18' text-anchor='middle' font-weight='600'>{_e(d)}</text>")
        sub = metric_of.get(d, "headline scores")
        out.append(f"<text x='{x}' y='34' text-anchor='middle' fill='#5b6675' font-size='10'>{_e(sub)}</text>")
    for i, a in enumerate(agents):
        y = head_h + i * cell_h
        out.append(f"<text x='{label_w - 8}' y='{y + cell_h / 2 + 4}' text-anchor='end' font-weight='600'>{_e(a)}</text>")
        for j, d in enumerate(datasets + ["mean"]):
            x = label_w + j * cell_w
            if d == "mean":
                v = means.get(a)
                fill = _blues(v) if v is not None else "#eee"
                ink = "#fff" if v is not None and v > 0.55 else "#1d2430"
                out.append(f"<g class='cell mean'><rect x='{x + 4}' y='{y + 2}' width='{cell_w - 6}' height='{cell_h - 4}' rx='4' "
                           f"fill='{fill}' stroke='#1d2430' stroke-dasharray='3 2'/>"
                           f"<text x='{x + cell_w / 2}' y='{y + cell_h / 2 + 5}' text-anchor='middle' font-size='16' "
                           f"font-weight='700' fill='{ink}'>{_pct(v)}</text></g>")
                continue
            s = cells.get((a, d))
            if s is None:
                out.append(f"<rect x='{x + 1}' y='{y + 2}' width='{cell_w - 2}' height='{cell_h - 4}' fill='#f3f5f8'/>")
                continue
            v = headline_value(s)
            clean = headline_value(s, s.clean) if s.clean is not None else None
            void = int(s.extra.get("void_count", 0))
            flagged = sum(n for k, n in s.verdict_counts.items() if k != "clean")
            fill = _blues(v) if v is not None else "#eee"
            ink = "#fff" if v is not None and v > 0.55 else "#1d2430"
            stroke = "#cf222e" if flagged else "#ffffff"
            title = (f"{a} on {d}: {s.headline} {_pct(v)} (n={s.n}); clean-only {_pct(clean)}; "
                     f"voided {void}; flagged {flagged}; {s.extra.get('rows', s.n)} attempts")
            out.append(
                f"<g class='cell' data-agent='{_e(a)}' data-dataset='{_e(d)}'><title>{_e(title)}</title>"
                f"<rect x='{x + 1}' y='{y + 2}' width='{cell_w - 2}' height='{cell_h - 4}' rx='4' fill='{fill}' "
                f"stroke='{stroke}' stroke-width='{3 if flagged else 1}'/>"
                f"<text x='{x + cell_w / 2}' y='{y + 25}' text-anchor='middle' font-size='17' font-weight='700' fill='{ink}'>{_pct(v)}</text>"
                f"<text x='{x + cell_w / 2}' y='{y + 44}' text-anchor='middle' font-size='10.5' fill='{ink}'>"
                f"clean {_pct(clean)} · void {void}</text></g>"
            )
    legend_y = head_h + cell_h * len(agents) + 14
    for k in range(11):
        out.append(f"<rect x='{label_w + k * 18}' y='{legend_y}' width='18' height='10' fill='{_blues(k / 10)}'/>")
    out.append(f"<text x='{label_w - 8}' y='{legend_y + 9}' text-anchor='end' font-size='10' fill='#5b6675'>0</text>")
    out.append(f"<text x='{label_w + 11 * 18 + 4}' y='{legend_y + 9}' font-size='10' fill='#5b6675'>100 · red border: "
               "the auditor flagged attempts in this cell</text>")
    out.append("</svg>")
    return "".join(out)


def baseline_svg(scores: list[AgentDatasetScore], datasets: list[str]) -> str:
    """Each agent's score with its 95% CI, against the best chance/prior baseline (dashed)."""
    agents = agent_order(scores)
    cells = {(s.agent, s.dataset): s for s in scores}
    datasets = [d for d in datasets if any(k[1] == d for k in cells)]
    base = best_baselines(scores)
    label_w, plot_w, row_h, gap = 150, 300, 16, 14
    rows_h = sum(len([a for a in agents if (a, d) in cells]) * row_h + gap + 16 for d in datasets)
    width, height = label_w + plot_w + 70, rows_h + 40
    out = [f"<svg id='vs-baseline' class='chart' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
           f"viewBox='0 0 {width} {height}' {FONT} font-size='11' role='img' aria-label='scores against the best baseline'>"]
    for k in range(0, 11, 2):
        x = label_w + plot_w * k / 10
        out.append(f"<line x1='{x}' y1='10' x2='{x}' y2='{height - 24}' stroke='#e6e9ee'/>"
                   f"<text x='{x}' y='{height - 10}' text-anchor='middle' fill='#5b6675'>{k * 10}</text>")
    y = 14
    colour = {a: PALETTE[i % len(PALETTE)] for i, a in enumerate(agents)}
    for d in datasets:
        present = [a for a in agents if (a, d) in cells]
        metric = cells[(present[0], d)].headline if present else ""
        out.append(f"<text x='4' y='{y + 8}' font-weight='600'>{_e(d)} <tspan fill='#5b6675' font-weight='400'>{_e(metric)}</tspan></text>")
        top = y + 12
        y += 16
        for a in present:
            s = cells[(a, d)]
            v = headline_value(s)
            ci = score_ci(s)
            cy = y + row_h / 2
            outcome = prior_outcome(s)  # aggregate.add_comparisons: above / not above / too few items to tell
            below = outcome == NOT_ABOVE
            if below:
                mark = " class='below-prior' fill='#bc4c00'><title>not above the best prior baseline</title>"
            elif outcome in (TOO_FEW, AT_CEILING):
                mark = f" class='untold-prior'><title>{_e(outcome)} against the best prior baseline</title>"
            else:
                mark = ">"
            out.append(f"<text x='{label_w - 6}' y='{cy + 4}' text-anchor='end'{mark}{'▼ ' if below else ''}{_e(a)}</text>")
            if ci:
                x0, x1 = label_w + plot_w * max(0.0, ci[0]), label_w + plot_w * min(1.0, ci[1])
                out.append(f"<line x1='{x0}' y1='{cy}' x2='{x1}' y2='{cy}' stroke='{colour[a]}' stroke-width='2'/>"
                           f"<line x1='{x0}' y1='{cy - 4}' x2='{x0}' y2='{cy + 4}' stroke='{colour[a]}'/>"
                           f"<line x1='{x1}' y1='{cy - 4}' x2='{x1}' y2='{cy + 4}' stroke='{colour[a]}'/>")
            if v is not None:
                cx = label_w + plot_w * min(max(v, 0.0), 1.0)
                delta = ""
                if d in base:
                    diff = 100 * (v - base[d][0])
                    delta = f" ({'+' if diff >= 0 else ''}{diff:.1f} vs baseline)"
                ci_txt = f", 95% CI {_pct(ci[0])}-{_pct(ci[1])}" if ci else ""
                out.append(f"<circle cx='{cx}' cy='{cy}' r='4.5' fill='{colour[a]}'><title>{_e(a)} {_pct(v)}{_e(ci_txt)}{_e(delta)}</title></circle>"
                           f"<text x='{label_w + plot_w + 6}' y='{cy + 4}' fill='#1d2430'>{_pct(v)}</text>")
            y += row_h
        if d in base:
            bx = label_w + plot_w * min(max(base[d][0], 0.0), 1.0)
            out.append(f"<line class='baseline' x1='{bx}' y1='{top}' x2='{bx}' y2='{y}' stroke='#cf222e' stroke-width='2' "
                       f"stroke-dasharray='4 3'><title>best baseline: {_e(base[d][1])} {_pct(base[d][0])}</title></line>")
        y += gap
    out.append(f"<text x='{label_w}' y='{height - 24 + 0}' fill='#cf222e' font-size='10' dy='-2'>- - best chance/prior baseline</text>")
    out.append("</svg>")
    return "".join(out)


def cost_svg(scores: list[AgentDatasetScore]) -> str:
    """Per agent: mean headline score against cost per attempt (tokens, or seconds, when nothing was paid)."""
    agents = agent_order(scores)
    means = agent_means(scores)
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for s in scores:
        rows = float(s.extra.get("rows", s.n) or 0)
        t = totals[s.agent]
        t[0] += s.cost_usd
        t[1] += s.tokens
        t[2] += s.mean_duration_s * rows
        t[3] += rows
    if any(t[0] > 0 for t in totals.values()):
        axis, pick, fmt = "cost per attempt ($)", 0, (lambda v: f"{v:.4g}")
    elif any(t[1] > 0 for t in totals.values()):
        axis, pick, fmt = "tokens per attempt", 1, (lambda v: f"{v:,.0f}")
    else:
        axis, pick, fmt = "seconds per attempt (no tokens were used)", 2, (lambda v: f"{v:.2g}")
    xs = {a: (totals[a][pick] / totals[a][3] if totals[a][3] else 0.0) for a in agents}
    xmax = max(list(xs.values()) + [1e-9]) * 1.15
    left, plot_w, plot_h, top = 48, 330, 200, 14
    width, height = left + plot_w + 150, top + plot_h + 44
    out = [f"<svg id='cost-score' class='chart' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
           f"viewBox='0 0 {width} {height}' {FONT} font-size='11' role='img' aria-label='cost against score'>"]
    for k in range(0, 11, 2):
        yy = top + plot_h * (1 - k / 10)
        out.append(f"<line x1='{left}' y1='{yy}' x2='{left + plot_w}' y2='{yy}' stroke='#e6e9ee'/>"
                   f"<text x='{left - 6}' y='{yy + 4}' text-anchor='end' fill='#5b6675'>{k * 10}</text>")
    for k in range(0, 5):
        xx = left + plot_w * k / 4
        out.append(f"<text x='{xx}' y='{top + plot_h + 16}' text-anchor='middle' fill='#5b6675'>{fmt(xmax * k / 4)}</text>")
    out.append(f"<line x1='{left}' y1='{top + plot_h}' x2='{left + plot_w}' y2='{top + plot_h}' stroke='#5b6675'/>"
               f"<line x1='{left}' y1='{top}' x2='{left}' y2='{top + plot_h}' stroke='#5b6675'/>"
               f"<text x='{left + plot_w / 2}' y='{top + plot_h + 34}' text-anchor='middle'>{_e(axis)}</text>"
               f"<text x='12' y='{top + plot_h / 2}' text-anchor='middle' transform='rotate(-90 12 {top + plot_h / 2})'>mean score</text>")
    for i, a in enumerate(agents):
        v = means.get(a)
        if v is None:
            continue
        cx = left + plot_w * (xs[a] / xmax)
        cy = top + plot_h * (1 - min(max(v, 0.0), 1.0))
        c = PALETTE[i % len(PALETTE)]
        out.append(f"<circle cx='{cx}' cy='{cy}' r='6' fill='{c}' fill-opacity='0.85'><title>{_e(a)}: {_pct(v)} at {fmt(xs[a])}</title></circle>"
                   f"<text x='{cx + 9}' y='{cy + 4}'>{_e(a)}</text>")
    out.append("</svg>")
    return "".join(out)


def audit_svg(scores: list[AgentDatasetScore]) -> str:
    """Per agent: verdicts (stacked bar) and the auditor's findings by category."""
    agents = agent_order(scores)
    verdicts: dict[str, Counter] = defaultdict(Counter)
    cats: dict[str, Counter] = defaultdict(Counter)
    for s in scores:
        verdicts[s.agent].update(s.verdict_counts)
        cats[s.agent].update(s.category_counts)
    all_cats = sorted({c for a in agents for c in cats[a]})
    cat_colour = {c: CATEGORY_COLOURS[i % len(CATEGORY_COLOURS)] for i, c in enumerate(all_cats)}
    label_w, bar_w, row_h = 150, 220, 22
    cat_max = max([sum(cats[a].values()) for a in agents] + [1])
    width = label_w + bar_w + 40 + bar_w + 20
    height = 34 + row_h * max(len(agents), 1) + 26 + 16 * max(2, (len(all_cats) + 1) // 2)
    out = [f"<svg id='audit-chart' class='chart' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
           f"viewBox='0 0 {width} {height}' {FONT} font-size='11' role='img' aria-label='audit findings'>"
           f"<text x='{label_w}' y='14' font-weight='600'>verdicts (share of attempts)</text>"
           f"<text x='{label_w + bar_w + 40}' y='14' font-weight='600'>findings by category (count)</text>"]
    for i, a in enumerate(agents):
        y = 26 + i * row_h
        out.append(f"<text x='{label_w - 6}' y='{y + 12}' text-anchor='end'>{_e(a)}</text>")
        total = sum(verdicts[a].values()) or 1
        x = float(label_w)
        for v in sorted(verdicts[a], key=lambda k: (["clean", "suspicious", "contaminated"] + [k]).index(k)):
            w = bar_w * verdicts[a][v] / total
            out.append(f"<rect class='verdict-{_e(v)}' x='{x}' y='{y}' width='{w}' height='16' fill='{VERDICT_COLOURS.get(v, '#6e7781')}'>"
                       f"<title>{_e(a)}: {verdicts[a][v]} {_e(v)}</title></rect>")
            x += w
        flagged = total - verdicts[a].get("clean", 0) if verdicts[a] else 0
        x = float(label_w + bar_w + 40)
        for c in all_cats:
            n = cats[a].get(c, 0)
            if not n:
                continue
            w = bar_w * n / cat_max
            out.append(f"<rect x='{x}' y='{y}' width='{w}' height='16' fill='{cat_colour[c]}'><title>{_e(a)}: {n} {_e(c)}</title></rect>")
            x += w
        note = f"{flagged} flagged" if flagged else "all clean"
        out.append(f"<text x='{x + 4 if sum(cats[a].values()) else label_w + bar_w + 40}' y='{y + 12}' fill='#5b6675'>{_e(note)}</text>")
    ly = 26 + row_h * max(len(agents), 1) + 10
    for k, name in enumerate(("clean", "suspicious", "contaminated")):
        lx, yy = label_w + (k % 2) * 110, ly + (k // 2) * 16
        out.append(f"<rect x='{lx}' y='{yy}' width='10' height='10' fill='{VERDICT_COLOURS[name]}'/><text x='{lx + 14}' y='{yy + 9}'>{name}</text>")
    for k, name in enumerate(all_cats):
        lx, yy = label_w + bar_w + 40 + (k % 2) * 120, ly + (k // 2) * 16
        out.append(f"<rect x='{lx}' y='{yy}' width='10' height='10' fill='{cat_colour[name]}'/><text x='{lx + 14}' y='{yy + 9}'>{_e(name)}</text>")
    if not all_cats:
        out.append(f"<text x='{label_w + bar_w + 40}' y='{ly + 9}' fill='#1a7f37'>no findings</text>")
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------- detailed plots (SVG too: no matplotlib in the report)


def confusion_svgs(confusions: dict[tuple[str, str], Counter]) -> str:
    """CP-Bench-style count confusion matrices for every count-answer dataset and agent."""
    out = []
    for (dataset, agent), pairs in sorted(confusions.items()):
        truths = sorted({t for t, _ in pairs})
        if len(truths) < 2:
            continue
        lo, hi = min(truths), max(truths)
        preds = [p for _, p in pairs if p is not None]
        plo, phi = max(min([lo] + preds), lo - 10), min(max([hi] + preds), hi + 10)
        cols = list(range(plo, phi + 1)) + ["?"]  # last column: unparsed / out of range
        rows = list(range(lo, hi + 1))
        mat = [[0] * len(cols) for _ in rows]
        for (t, p), n in pairs.items():
            j = (p - plo) if p is not None and plo <= p <= phi else len(cols) - 1
            mat[t - lo][j] += n
        top = max(max(r) for r in mat) or 1
        cell, left, head = 24, 40, 34
        width, height = max(left + cell * len(cols) + 10, 300), head + cell * len(rows) + 34
        parts = [f"<svg class='chart confusion' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
                 f"viewBox='0 0 {width} {height}' {FONT} font-size='10' role='img' aria-label='confusion {_e(dataset)} {_e(agent)}'>"
                 f"<text x='{left}' y='12' font-size='11' font-weight='600'>{_e(dataset)} · {_e(agent)}</text>"]
        for j, c in enumerate(cols):
            parts.append(f"<text x='{left + j * cell + cell / 2}' y='{head - 6}' text-anchor='middle' fill='#5b6675'>{c}</text>")
        for i, t in enumerate(rows):
            y = head + i * cell
            parts.append(f"<text x='{left - 6}' y='{y + cell / 2 + 4}' text-anchor='end' fill='#5b6675'>{t}</text>")
            for j, n in enumerate(mat[i]):
                v = n / top
                ink = "#fff" if v > 0.55 else "#1d2430"
                parts.append(f"<rect x='{left + j * cell}' y='{y}' width='{cell - 1}' height='{cell - 1}' fill='{_blues(v)}'>"
                             f"<title>true {t}, answered {cols[j]}: {n}</title></rect>")
                if n:
                    parts.append(f"<text x='{left + j * cell + cell / 2}' y='{y + cell / 2 + 4}' text-anchor='middle' fill='{ink}'>{n}</text>")
        parts.append(f"<text x='{left}' y='{height - 8}' fill='#5b6675'>rows: true count · columns: answered (? unparsed/far)</text>")
        parts.append("</svg>")
        out.append("<div>" + "".join(parts) + "</div>")
    return "<div class=grid>" + "".join(out) + "</div>" if out else "<p>No count questions in this run.</p>"


def curve_svgs(curves: dict[str, dict[str, list[list[float]]]], edges_of: dict[str, list[float]]) -> str:
    """Streaming benchmarks: how the per-query score evolves with the query time."""
    out = []
    for dataset, agents in sorted(curves.items()):
        edges = edges_of.get(dataset) or []
        if len(edges) < 2:
            continue
        left, plot_w, plot_h, top = 44, 360, 170, 22
        width, height = left + plot_w + 150, top + plot_h + 40
        t0, t1 = edges[0], edges[-1] if edges[-1] > edges[0] else edges[0] + 1
        parts = [f"<svg class='chart curve' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
                 f"viewBox='0 0 {width} {height}' {FONT} font-size='10' role='img' aria-label='query-time {_e(dataset)}'>"
                 f"<text x='{left}' y='12' font-size='11' font-weight='600'>{_e(dataset)}</text>"]
        for k in range(0, 11, 2):
            y = top + plot_h * (1 - k / 10)
            parts.append(f"<line x1='{left}' y1='{y}' x2='{left + plot_w}' y2='{y}' stroke='#e6e9ee'/>"
                         f"<text x='{left - 4}' y='{y + 3}' text-anchor='end' fill='#5b6675'>{k / 10:.1f}</text>")
        for k in range(5):
            t = t0 + (t1 - t0) * k / 4
            parts.append(f"<text x='{left + plot_w * k / 4}' y='{top + plot_h + 14}' text-anchor='middle' fill='#5b6675'>{t:.0f}</text>")
        parts.append(f"<text x='{left + plot_w / 2}' y='{top + plot_h + 30}' text-anchor='middle'>query time (s)</text>")
        for i, (agent, bins) in enumerate(sorted(agents.items())):
            pts = []
            for k, (total, n) in enumerate(bins):
                if n:
                    x = left + plot_w * (((edges[k] + edges[k + 1]) / 2 - t0) / (t1 - t0))
                    pts.append((x, top + plot_h * (1 - min(max(total / n, 0.0), 1.0))))
            c = PALETTE[i % len(PALETTE)]
            if pts:
                parts.append(f"<polyline fill='none' stroke='{c}' stroke-width='2' points='{' '.join(f'{x:.1f},{y:.1f}' for x, y in pts)}'/>")
                parts.extend(f"<circle cx='{x:.1f}' cy='{y:.1f}' r='3' fill='{c}'/>" for x, y in pts)
            parts.append(f"<rect x='{left + plot_w + 12}' y='{top + i * 14}' width='10' height='10' fill='{c}'/>"
                         f"<text x='{left + plot_w + 26}' y='{top + i * 14 + 9}'>{_e(agent)}</text>")
        parts.append("</svg>")
        out.append("<div>" + "".join(parts) + "</div>")
    return "<div class=grid>" + "".join(out) + "</div>" if out else "<p>No streaming questions in this run.</p>"
