"""From predictions to a `ScoreReport`: metrics, label breakdowns, CIs, chance baselines.

The fixed keys (`benchmark`, `n`, `metrics`, `groups`, `warnings`) are what
`statebox score --json` prints and outside checks read. Extra keys: `ci`
(95% bootstrap intervals clustered by video), `chance` (random and frequency
baselines scored by the same rules), `parse_failures`, `missing`, `judge`.
"""

from __future__ import annotations

import gc
import math
import random
from contextlib import contextmanager
from typing import Any

import numpy as np

from statebox.schema import GroupScore, Item, ScoreReport
from statebox.scoring.chance import KINDS, chance_model
from statebox.scoring.core import Answer, ScoredTable
from statebox.scoring.judge import FuzzyJudge
from statebox.scoring.predictions import match
from statebox.scoring.rules import rules_for
from statebox.scoring.stats import bootstrap_means, cluster_codes, percentile_interval


def _means(values: dict[str, np.ndarray], mask: np.ndarray | None = None) -> dict[str, float]:
    out = {}
    for name, column in values.items():
        chosen = column if mask is None else column[mask]
        counted = chosen[~np.isnan(chosen)]
        out[name] = float(counted.mean()) if counted.size else math.nan
    return out


def _clean(metrics: dict[str, Any], headline: tuple[str, ...]) -> dict[str, float | None]:
    """Headline keys first, internal (`_`) keys dropped, NaN -> None, numpy -> float."""
    ordered = list(headline) + sorted(k for k in metrics if k not in headline)
    out: dict[str, float | None] = {}
    for key in ordered:
        if key.startswith("_") or key not in metrics:
            continue
        value = float(metrics[key])
        out[key] = None if math.isnan(value) else value
    return out


def cluster_of(item: Item) -> str:
    """Bootstrap cluster: the video (with its dataset/source, since file names repeat across sources)."""
    video_id = item.meta.get("video_id")
    if video_id not in (None, ""):
        return f"{item.benchmark}:{video_id}"
    return f"{item.meta.get('source_dataset') or ''}/{item.video}"


def label_groups(items: list[Item]) -> dict[str, np.ndarray]:
    """'<label>=<value>' -> item mask; list-valued labels (joined with '|') count in each value's group."""
    groups: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        for key, value in item.labels.items():
            for part in str(value).split("|"):
                groups.setdefault(f"{key}={part}", []).append(index)
    out = {}
    for name in sorted(groups):
        mask = np.zeros(len(items), dtype=bool)
        mask[groups[name]] = True
        out[name] = mask
    return out


@contextmanager
def _collector_paused():
    """Scoring allocates millions of short-lived tuples and no reference cycles; the cyclic
    collector would otherwise re-scan every loaded Item on each allocation burst."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def score_table(bench: str, items: list[Item], predictions: list[Any], judge: Any = None,
                source: str = "predictions") -> tuple[ScoredTable, list[str]]:
    rules = rules_for(bench)
    with _collector_paused():
        answers, warnings = match(items, predictions, source)
        return rules.score_table(items, answers, judge), warnings


def score_predictions(bench: str, items: list[Item], predictions: list[Any], judge: Any = None, *,
                      n_boot: int = 1000, seed: int = 0, chance: bool = True,
                      source: str = "predictions") -> ScoreReport:
    """Score `predictions` (dicts, `schema.Prediction`s or loaded lines) against `items`."""
    rules = rules_for(bench)
    if bench == "ecbench" and judge is None:
        from statebox.scoring.judge import make_judge

        judge = make_judge("auto")
    table, warnings = score_table(bench, items, predictions, judge, source)
    warnings = warnings + table.warnings

    metrics = rules.derive(_means(table.values))
    if bench == "ecbench":
        for key in rules.OFFICIAL_ZERO:  # the released summary prints 0.0 for an empty denominator
            if key in metrics and math.isnan(float(metrics[key])):
                metrics[key] = 0.0
    report_metrics = _clean(metrics, rules.HEADLINE)

    groups = {}
    for name, mask in label_groups(items).items():
        groups[name] = GroupScore(n=int(mask.sum()), metrics=_clean(rules.derive(_means(table.values, mask)),
                                                                     rules.HEADLINE))
    extra: dict[str, Any] = {
        "n_queries": table.queries,
        "parse_failures": {"count": table.parse_failures, "queries": table.queries,
                           "rate": table.parse_failures / table.queries if table.queries else 0.0},
        "missing": table.missing,
    }
    if n_boot > 0 and items:
        extra["ci"] = _confidence_intervals(rules, table, items, n_boot, seed, set(report_metrics))
    if chance and items:
        with _collector_paused():
            extra["chance"] = {kind: _chance_metrics(bench, rules, items, kind, seed) for kind in KINDS}
    extra.update(table.extra)
    return ScoreReport(benchmark=bench, n=len(items), metrics=report_metrics, groups=groups,
                       warnings=warnings, **extra)


def _confidence_intervals(rules: Any, table: ScoredTable, items: list[Item], n_boot: int, seed: int,
                          wanted: set[str]) -> dict[str, list[float] | None]:
    names = list(table.values)
    matrix = np.column_stack([table.values[n] for n in names]) if names else np.zeros((len(items), 0))
    replicates = bootstrap_means(matrix, cluster_codes([cluster_of(i) for i in items]), n_boot=n_boot, seed=seed)
    derived = rules.derive({name: replicates[:, j] for j, name in enumerate(names)})
    out: dict[str, list[float] | None] = {}
    for key in rules.HEADLINE + tuple(sorted(k for k in derived if k not in rules.HEADLINE)):
        if key.startswith("_") or key not in wanted:
            continue
        interval = percentile_interval(np.asarray(derived[key], dtype=float))
        out[key] = list(interval) if interval else None
    return out


def _chance_metrics(bench: str, rules: Any, items: list[Item], kind: str, seed: int) -> dict[str, float | None]:
    rng = random.Random(seed)  # per-call draws from random.Random are ~10x cheaper than numpy's
    model = chance_model(bench, items)
    answers = {
        (item.id, q.index): Answer(model.respond(item, position, kind, rng))
        for item in items
        for position, q in enumerate(item.queries)
    }
    table = rules.score_table(items, answers, FuzzyJudge())
    metrics = _clean(rules.derive(_means(table.values)), rules.HEADLINE)
    return {k: metrics.get(k) for k in rules.HEADLINE}
