"""From predictions to a `ScoreReport`: metrics, label breakdowns, CIs, chance baselines.

The fixed keys (`benchmark`, `n`, `metrics`, `groups`, `warnings`) are what
`statebox score --json` prints and outside checks read. Extra keys: `ci`
(95% bootstrap intervals clustered by video), `chance` (random and frequency
baselines scored by the same rules), `parse_failures`, `missing`, `judge`.
"""

from __future__ import annotations

import math
import random
from itertools import repeat
from operator import attrgetter
from typing import Any

import numpy as np

from statebox.schema import GroupScore, Item, ScoreReport
from statebox.scoring.chance import KINDS, chance_model
from statebox.collector import collector_paused
from statebox.scoring.core import Answer, ScoredTable
from statebox.scoring.judge import FuzzyJudge, make_judge
from statebox.scoring.layout import query_layout
from statebox.scoring.predictions import match, match_responses
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


def cluster_names(items: list[Item]) -> list[str]:
    """`cluster_of` of every item (one pass, no call per item)."""
    return [f"{item.benchmark}:{video_id}" if (video_id := item.meta.get("video_id")) not in (None, "")
            else f"{item.meta.get('source_dataset') or ''}/{item.video}" for item in items]


_ABSENT = object()


def label_groups(items: list[Item]) -> dict[str, np.ndarray]:
    """'<label>=<value>' -> item mask; list-valued labels (joined with '|') count in each value's group.

    Label by label: each item's value becomes a code into the label's distinct values, and a group's
    mask is a lookup of those codes (a label has a handful of values, a dataset many items)."""
    label_dicts = list(map(attrgetter("labels"), items))
    masks: dict[str, np.ndarray] = {}
    for key in dict.fromkeys(key for labels in label_dicts for key in labels):
        column = list(map(dict.get, label_dicts, repeat(key), repeat(_ABSENT)))
        try:
            code_of = {value: code for code, value in enumerate(dict.fromkeys(column))}
        except TypeError:  # an unhashable value (an item built without validation): the plain loop
            return _label_groups_plain(items)
        codes = np.fromiter(map(code_of.__getitem__, column), dtype=np.int64, count=len(column))
        for value, code in code_of.items():
            if value is _ABSENT:
                continue
            for part in str(value).split("|"):
                name = f"{key}={part}"
                lookup = np.zeros(len(code_of), dtype=bool)
                lookup[code] = True
                masks[name] = masks[name] | lookup[codes] if name in masks else lookup[codes]
    return {name: masks[name] for name in sorted(masks)}


def _label_groups_plain(items: list[Item]) -> dict[str, np.ndarray]:
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


def score_table(bench: str, items: list[Item], predictions: list[Any], judge: Any = None,
                source: str = "predictions") -> tuple[ScoredTable, list[str]]:
    rules = rules_for(bench)
    with collector_paused():
        score_responses = getattr(rules, "score_responses", None)
        if score_responses is not None:  # a rule that reads the responses alone, in layout order
            responses, warnings = match_responses(items, predictions, source)
            return score_responses(items, responses), warnings
        answers, warnings = match(items, predictions, source)
        return rules.score_table(items, answers, judge), warnings


def score_predictions(bench: str, items: list[Item], predictions: list[Any], judge: Any = None, *,
                      n_boot: int = 1000, seed: int = 0, chance: bool = True,
                      source: str = "predictions") -> ScoreReport:
    """Score `predictions` (dicts, `schema.Prediction`s or loaded lines) against `items`."""
    if bench == "ecbench" and judge is None:
        judge = make_judge("auto")
    table, warnings = score_table(bench, items, predictions, judge, source)
    return report_from_table(bench, items, table, warnings, n_boot=n_boot, seed=seed, chance=chance)


def report_from_table(bench: str, items: list[Item], table: ScoredTable, warnings: list[str], *,
                      n_boot: int = 1000, seed: int = 0, chance: bool = True,
                      groups: dict[str, np.ndarray] | None = None, codes: np.ndarray | None = None,
                      chance_metrics: dict[str, Any] | None = None) -> ScoreReport:
    """The `ScoreReport` of an already scored table (what `score_predictions` returns for it).

    `groups` (`label_groups(items)`), `codes` (`cluster_codes` of the items' videos) and
    `chance_metrics` may be passed when the caller has them already (they depend on the items only).
    """
    rules = rules_for(bench)
    warnings = warnings + table.warnings
    report_metrics, group_scores = _metrics_and_groups(bench, rules, table.values, items, groups)
    extra: dict[str, Any] = {
        "n_queries": table.queries,
        "parse_failures": {"count": table.parse_failures, "queries": table.queries,
                           "rate": table.parse_failures / table.queries if table.queries else 0.0},
        "missing": table.missing,
    }
    if n_boot > 0 and items:
        if codes is None:
            codes = cluster_codes(cluster_names(items))
        extra["ci"] = _confidence_intervals(rules, table, items, n_boot, seed, set(report_metrics), codes)
    if chance_metrics is not None and items:
        extra["chance"] = chance_metrics
    elif chance and items:
        with collector_paused():
            extra["chance"] = {kind: chance_baseline_metrics(bench, rules, items, kind, seed) for kind in KINDS}
    extra.update(table.extra)
    return ScoreReport(benchmark=bench, n=len(items), metrics=report_metrics, groups=group_scores,
                       warnings=warnings, **extra)


def _metrics_and_groups(bench: str, rules: Any, values: dict[str, np.ndarray], items: list[Item],
                        groups: dict[str, np.ndarray] | None = None) -> tuple[dict[str, float | None], dict[str, GroupScore]]:
    metrics = rules.derive(_means(values))
    if bench == "ecbench":
        for key in rules.OFFICIAL_ZERO:  # the released summary prints 0.0 for an empty denominator
            if key in metrics and math.isnan(float(metrics[key])):
                metrics[key] = 0.0
    report_metrics = _clean(metrics, rules.HEADLINE)
    out = {}
    for name, mask in (label_groups(items) if groups is None else groups).items():
        out[name] = GroupScore(n=int(mask.sum()), metrics=_clean(rules.derive(_means(values, mask)), rules.HEADLINE))
    return report_metrics, out


def view_report(bench: str, items: list[Item], values: dict[str, np.ndarray],
                groups: dict[str, np.ndarray] | None = None) -> ScoreReport:
    """A metrics-only `ScoreReport` (n, metrics, groups as `score_predictions` computes them; no CI,
    chance baselines or parse counts) of per-item values already scored."""
    rules = rules_for(bench)
    report_metrics, group_scores = _metrics_and_groups(bench, rules, values, items, groups)
    return ScoreReport(benchmark=bench, n=len(items), metrics=report_metrics, groups=group_scores, warnings=[])


class ItemIndex:
    """What depends on a dataset's items only, computed once and restricted to any subset:
    label groups, bootstrap cluster codes, each item's position.

    Restriction is exact: `groups_for(P)` equals `label_groups([items[p] for p in P])` (groups
    sorted by name, empty ones dropped) and `codes_for(P)` equals their `cluster_codes` (the
    codes are ranks of the sorted cluster names, so re-ranking a subset's codes gives its ranks).
    """

    def __init__(self, items: list[Item]) -> None:
        self.items = items
        self.position = {item.id: k for k, item in enumerate(items)}
        self.groups = label_groups(items)
        self.codes = cluster_codes(cluster_names(items)) if items else np.zeros(0, dtype=np.int64)

    def groups_for(self, positions: np.ndarray) -> dict[str, np.ndarray]:
        out = {}
        for name, mask in self.groups.items():
            sub = mask[positions]
            if sub.any():
                out[name] = sub
        return out

    def codes_for(self, positions: np.ndarray) -> np.ndarray:
        _, codes = np.unique(self.codes[positions], return_inverse=True)
        return codes.astype(np.int64)


def restrict_values(bench: str, values: dict[str, np.ndarray], keep: np.ndarray,
                    items: list[Item]) -> dict[str, np.ndarray]:
    """The table a scorer would build for the kept items alone: the same per-item values (every
    rule scores an item from its own answers only), and the columns those items have."""
    rules = rules_for(bench)
    columns = getattr(rules, "columns_for", None)
    names = columns(items) if columns is not None else tuple(values)
    return {name: values[name][keep] for name in names}


def _confidence_intervals(rules: Any, table: ScoredTable, items: list[Item], n_boot: int, seed: int,
                          wanted: set[str], codes: np.ndarray | None = None) -> dict[str, list[float] | None]:
    names = list(table.values)
    matrix = np.column_stack([table.values[n] for n in names]) if names else np.zeros((len(items), 0))
    if codes is None:
        codes = cluster_codes(cluster_names(items))
    replicates = bootstrap_means(matrix, codes, n_boot=n_boot, seed=seed)
    derived = rules.derive({name: replicates[:, j] for j, name in enumerate(names)})
    out: dict[str, list[float] | None] = {}
    for key in rules.HEADLINE + tuple(sorted(k for k in derived if k not in rules.HEADLINE)):
        if key.startswith("_") or key not in wanted:
            continue
        interval = percentile_interval(np.asarray(derived[key], dtype=float))
        out[key] = list(interval) if interval else None
    return out


def chance_baseline_metrics(bench: str, rules: Any, items: list[Item], kind: str, seed: int) -> dict[str, float | None]:
    rng = random.Random(seed)  # the baselines' numbers come from these draws (randint, as respond_all)
    model = chance_model(bench, items)
    score_responses = getattr(rules, "score_responses", None)
    score_coded = getattr(rules, "score_coded", None)
    coded = model.respond_coded(items, kind, rng) if score_coded is not None else None
    if score_coded is not None and coded is not None:
        table = score_coded(items, *coded)  # the same answers, as codes into their distinct texts
    elif score_responses is not None and query_layout(items).index_of is not None:
        table = score_responses(items, model.respond_all(items, kind, rng))  # in layout order already
    else:
        responses = model.respond_all(items, kind, rng)
        answers = dict(zip(((item.id, q.index) for item in items for q in item.queries), map(Answer, responses)))
        table = rules.score_table(items, answers, FuzzyJudge())
    metrics = _clean(rules.derive(_means(table.values)), rules.HEADLINE)
    return {k: metrics.get(k) for k in rules.HEADLINE}
