"""The one scorer: response parsing, metrics, per-benchmark rules, statistics.

- `score_predictions(bench, items, predictions, judge=None) -> ScoreReport` (what `statebox score --json` prints)
- `score_query(bench, item, query_index, response, clips=None, judge=None) -> ScoreRow` (one attempt)
- `chance_response(bench, item, query_index, items, kind, rng) -> str` (`random` | `frequency`)
- `stats.bootstrap_ci(values, clusters, n_boot=1000, seed=0)` (95% CI clustered by video)
- `judge.make_judge(kind="auto")` (EC-Bench enumeration: openai | anthropic | fuzzy)
"""

from __future__ import annotations

from typing import Any

from statebox.errors import UserError
from statebox.schema import Item, ScoreReport, ScoreRow
from statebox.scoring.chance import chance_response as _chance
from statebox.scoring.judge import make_judge
from statebox.scoring.report import score_predictions as _score
from statebox.scoring.rules import rules_for


def score_predictions(bench: str, items: list[Item], predictions: list[Any], judge: Any = None,
                      **options: Any) -> ScoreReport:
    return _score(bench, items, predictions, judge, **options)


def score_query(bench: str, item: Item, query_index: int, response: str, clips: Any = None,
                judge: Any = None) -> ScoreRow:
    """Score one response to one query (per-attempt correctness for the harness).

    Metrics always include `correct` (1.0 / 0.0); plus the benchmark's per-query
    values (VCBench `gpa` of the point, VSTAT `score`, EOC `msta`, EC-Bench `span_iou`, ...).
    """
    if not 0 <= query_index < len(item.queries):
        raise UserError(f"item {item.id} has no query {query_index}")
    if bench == "ecbench" and judge is None and item.labels.get("task_type") == "Enumeration":
        judge = make_judge("auto")
    return rules_for(bench).score_query(item, query_index, response, clips, judge)


def chance_response(bench: str, item: Item, query_index: int, items: list[Item], kind: str, rng: Any) -> str:
    return _chance(bench, item, query_index, items, kind, rng)


__all__ = ["score_predictions", "score_query", "chance_response"]
