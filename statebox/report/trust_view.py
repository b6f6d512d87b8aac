"""Measured trust as people read it: the terminal table printed under the leaderboard, the leaderboard's
trust cell and the report's HTML table, from the figures of `harness/trust_results.py`.

Every agent- or data-controlled name goes through `visible`/`visible_html` (hidden characters spelt
<U+XXXX>, markup escaped).
"""

from __future__ import annotations

from collections import defaultdict

from rich.table import Table
from rich.text import Text

from statebox.harness.trust_results import TrustOutcome, TrustResult, flagged, pooled
from statebox.report.visible_text import visible, visible_html


def _rows(outcome: TrustOutcome) -> list[tuple[str, str, TrustResult]]:
    """Table rows: each (agent, dataset), then each agent over all datasets when it has several."""
    rows = [(d, a, r) for (a, d), r in sorted(outcome.results.items(), key=lambda kv: (kv[0][1], kv[0][0]))]
    if len({d for d, _, _ in rows}) > 1:
        rows += [("all", a, r) for a, r in sorted(pooled(outcome.results).items())]
    return rows


def trust_table(outcome: TrustOutcome) -> Table:
    """The terminal's "measured trust" table, printed under the leaderboard: per agent and dataset,
    impossible-item hits with the rate's 95% interval beside the chance rate, and memorised twins."""
    table = Table(title="measured trust (impossible items, counterfactual twins)", pad_edge=False)
    for col in ("dataset", "agent", "impossible hits", "rate [95% CI]", "chance", "memorised/twins", "by chance", "flags"):
        table.add_column(col, justify="left" if col in ("dataset", "agent", "flags") else "right")
    for dataset, agent, r in _rows(outcome):
        imp, cf = r.impossible, r.counterfactual
        rate = "-" if imp.rate is None else f"{100 * imp.rate:.0f}%" + (f" [{100 * imp.ci[0]:.0f}-{100 * imp.ci[1]:.0f}]" if imp.ci else "")
        chance = "-" if imp.chance_rate is None else f"{100 * imp.chance_rate:.0f}%"
        flags = flagged(r)
        cf_chance = "-" if cf.chance_rate is None else f"{100 * cf.chance_rate:.0f}%"
        # names as plain text (no rich markup read from them), hidden characters spelt <U+XXXX>
        table.add_row(Text(visible(dataset)), Text(visible(agent)), f"{imp.hits}/{imp.n}", rate, chance, f"{cf.memorised}/{cf.n}", cf_chance,
                      "[bold red]" + ", ".join(flags) + "[/]" if flags else "")
    return table


def trust_html(outcome: TrustOutcome) -> str:
    """The report's "Measured trust" table (escaped; the same figures as the terminal table)."""
    escape = visible_html  # agent-controlled text: hidden characters spelt <U+XXXX>

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.0f}%"

    def ci(c: tuple[float, float] | None) -> str:
        return "" if not c else f" [{100 * c[0]:.0f}-{100 * c[1]:.0f}]"

    head = ("<tr><th>dataset</th><th>agent</th><th>impossible hits</th><th>hit rate [95% CI]</th><th>chance</th>"
            "<th>memorised / twins</th><th>[95% CI]</th><th>by chance</th><th>flags</th><th>evidence</th></tr>")
    body = []
    for dataset, agent, r in _rows(outcome):
        imp, cf = r.impossible, r.counterfactual
        flags = flagged(r)
        evidence = "; ".join(f"{p.original} / {p.twin}" for p in cf.pairs[:5]) + (" ..." if len(cf.pairs) > 5 else "")
        body.append(
            f"<tr{' class=flagged' if flags else ''}><td>{escape(dataset)}</td><td>{escape(agent)}</td>"
            f"<td>{imp.hits}/{imp.n}</td><td>{pct(imp.rate)}{ci(imp.ci)}</td><td>{pct(imp.chance_rate)}</td>"
            f"<td>{cf.memorised}/{cf.n}</td><td>{ci(cf.ci)}</td><td>{pct(cf.chance_rate)}</td>"
            f"<td>{escape(', '.join(flags))}</td><td><small>{escape(evidence)}</small></td></tr>")
    kinds: dict[str, int] = defaultdict(int)
    for t in outcome.plan.items:
        kinds[t.construction] += 1
    made = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    notes = "".join(f"<li>{escape(n)}</li>" for n in outcome.plan.notes)
    return (f"<p class=sub>Mixed in, unlabelled: {escape(made)}. A hit answers an impossible item with the plausible "
            "answer its annotation and decoys hold (a leak or a guess); chance = the chance-random baseline's hit rate. "
            "Memorised: right on the source item and the source's answer again on its twin, whose truth differs "
            "(evidence: source / twin attempt ids). Neither counts in the scores above.</p>"
            f"<table class=trust>{head}{''.join(body)}</table>" + (f"<ul class=sub>{notes}</ul>" if notes else ""))
