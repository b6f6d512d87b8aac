"""The terminal leaderboard: the same numbers as the HTML report, as a rich table.

The last column compares each row with the best prior baseline of its dataset (chance,
query-index prior, blind; `aggregate.add_comparisons`): a margin, or `NOT above <prior>`
for an agent that does not beat it; a sweep's best-of row names the budget it repeats."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from statebox.harness.aggregate import AgentDatasetScore
from statebox.harness.attribution import FailureAttribution, outcomes


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def leaderboard_table(scores: list[AgentDatasetScore], title: str = "statebox leaderboard") -> Table:
    """Compact enough for an 80-column terminal: the metric name rides in the score cell."""
    table = Table(title=title, show_lines=False, pad_edge=False)
    for col, justify in [
        ("dataset", "left"),
        ("agent", "left"),
        ("score", "right"),
        ("95% CI", "right"),
        ("clean", "right"),
        ("voided", "right"),
        ("n", "right"),
        ("audit", "left"),
        ("s/att", "right"),
        ("vs prior", "left"),
    ]:
        table.add_column(col, justify=justify, no_wrap=col != "audit")  # type: ignore[arg-type]
    for s in sorted(scores, key=lambda s: (s.dataset, -(s.report.metrics.get(s.headline) or 0.0))):
        metric = s.headline
        ci = (s.report.model_extra or {}).get("ci", {}) or {}
        ci_m = ci.get(metric)
        ci_txt = f"{_pct(ci_m[0])}-{_pct(ci_m[1])}" if ci_m else "-"
        flags = " ".join(f"{k}:{v}" for k, v in sorted(s.verdict_counts.items()) if k != "clean") or "clean"
        failed = {k: v for k, v in s.status_counts.items() if k != "ok"}
        if failed:
            flags += " " + " ".join(f"{k}:{v}" for k, v in sorted(failed.items()))
        table.add_row(
            s.dataset,
            s.agent,
            f"{_pct(s.report.metrics.get(metric))} {metric}",
            ci_txt,
            _pct(s.clean.metrics.get(metric)) if s.clean else "-",
            _pct(s.voided.metrics.get(metric)),
            str(s.n),
            flags,
            f"{s.mean_duration_s:.1f}",
            _vs_prior(s),
        )
    return table


def _vs_prior(s: AgentDatasetScore) -> str:
    notes = []
    if s.best_of is not None:
        notes.append(f"best of {len(s.extra.get('budgets', {}))}: {s.best_of.partition('@')[2]}")
    prior = s.extra.get("prior")
    if s.is_baseline:
        notes.append("baseline")
    elif prior:
        value = s.headline_value
        margin = "" if value is None else f"{100 * (value - prior['value']):+.1f} "
        if s.extra.get("beats_prior"):
            notes.append(f"{margin}vs {prior['name']}")
        else:
            notes.append(f"[bold red]NOT above[/] {prior['name']} {_pct(prior['value'])}")
    return "; ".join(notes)


def attribution_table(found: list[FailureAttribution]) -> Table:
    """The report's "first failing step" figures (first epoch) as a terminal table."""
    names = outcomes()
    table = Table(title="first failing step (failure-mode probes, first epoch)", pad_edge=False)
    table.add_column("dataset")
    table.add_column("agent")
    table.add_column("parents", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    for a in sorted(found, key=lambda a: (a.dataset, a.agent)):
        counts = a.counts
        total = sum(counts.values())
        table.add_row(a.dataset, a.agent, f"{total}/{a.parents}",
                      *(f"{counts.get(n, 0)} ({_pct(counts.get(n, 0) / total) if total else '-'}%)" for n in names))
    return table


def print_leaderboard(scores: list[AgentDatasetScore], console: Console | None = None, title: str = "statebox leaderboard") -> None:
    (console or wide_console()).print(leaderboard_table(scores, title))


def wide_console(stderr: bool = False) -> Console:
    """Piped output defaults to 80 columns; a leaderboard needs more to stay legible."""
    return Console(stderr=stderr, width=max(Console(stderr=stderr).width, 132))
