"""From stored attempt rows to the numbers people read: scores per agent and dataset,
with the auditor's three views side by side.

Every score goes through the one shared scorer (`statebox.scoring.score_predictions`),
so a run's leaderboard and `statebox score` on the same predictions agree exactly.
The three views (why: a score is only as good as its audit):
- `all`: every attempt as answered;
- `clean`: only items whose attempts the auditor found clean;
- `voided`: attempts whose verdict maps to the `void` action answer nothing (scored wrong).
Multiple epochs are scored one epoch at a time and averaged.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from statebox.harness.store import ResultRow
from statebox.schema import Item, Prediction, ScoreReport

HEADLINE_METRIC = {
    "vstat": "score",
    "vcbench": "gpa",
    "ecbench": "counting_accuracy",
    "eocbench": "accuracy",
    "cpbench": "accuracy",
}


@dataclass
class AgentDatasetScore:
    agent: str
    dataset: str
    bench: str
    n: int
    report: ScoreReport
    clean: ScoreReport | None
    voided: ScoreReport
    status_counts: dict[str, int]
    verdict_counts: dict[str, int]
    category_counts: dict[str, int]
    tokens: int = 0
    cost_usd: float = 0.0
    mean_duration_s: float = 0.0
    frames_decoded: int = 0
    frames_model: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def headline(self) -> str:
        return HEADLINE_METRIC.get(self.bench, next(iter(self.report.metrics), ""))

    def to_json(self) -> dict[str, Any]:
        """The `run --json` result entry (metrics named as `statebox score --json` names them)."""
        return {
            "agent": self.agent,
            "dataset": self.dataset,
            "bench": self.bench,
            "n": self.n,
            "metrics": self.report.metrics,
            "groups": {k: v.model_dump() for k, v in self.report.groups.items()},
            "status_counts": self.status_counts,
            "clean_metrics": self.clean.metrics if self.clean else None,
            "voided_metrics": self.voided.metrics,
            "verdict_counts": self.verdict_counts,
            "audit_categories": self.category_counts,
            "ci": (self.report.model_extra or {}).get("ci"),
            "tokens": self.tokens,
            "cost_usd": round(self.cost_usd, 6),
            "mean_duration_s": round(self.mean_duration_s, 3),
            "frames_decoded": self.frames_decoded,
            "frames_model": self.frames_model,
        }


def _predictions(rows: list[ResultRow], *, void: bool) -> list[Prediction]:
    preds = []
    for r in rows:
        response = "" if (void and r.action == "void") else r.response
        preds.append(Prediction(id=r.item_id, query_index=r.query_index, response=response))
    return preds


def _mean_reports(reports: list[ScoreReport]) -> ScoreReport:
    """Average metric values across epochs (groups likewise); one epoch passes through."""
    if len(reports) == 1:
        return reports[0]

    def mean_of(dicts: list[dict[str, float | None]]) -> dict[str, float | None]:
        keys = dicts[0].keys()
        out: dict[str, float | None] = {}
        for k in keys:
            vals = [d.get(k) for d in dicts if d.get(k) is not None]
            out[k] = sum(vals) / len(vals) if vals else None
        return out

    base = reports[0].model_copy(deep=True)
    base.metrics = mean_of([r.metrics for r in reports])
    for key, group in base.groups.items():
        group.metrics = mean_of([r.groups[key].metrics for r in reports if key in r.groups])
    base.warnings = sorted({w for r in reports for w in r.warnings})
    return base


def _score(bench: str, items: list[Item], rows: list[ResultRow], *, void: bool) -> ScoreReport:
    from statebox.scoring import score_predictions

    by_epoch: dict[int, list[ResultRow]] = defaultdict(list)
    for r in rows:
        by_epoch[r.epoch].append(r)
    reports = []
    for epoch in sorted(by_epoch):
        epoch_rows = by_epoch[epoch]
        answered = {r.item_id for r in epoch_rows}
        epoch_items = [i for i in items if i.id in answered]
        reports.append(score_predictions(bench, epoch_items, _predictions(epoch_rows, void=void)))
    return _mean_reports(reports)


def score_agent_dataset(agent: str, dataset: str, bench: str, items: list[Item], rows: list[ResultRow]) -> AgentDatasetScore:
    report = _score(bench, items, rows, void=False)
    voided = _score(bench, items, rows, void=True)
    dirty_items = {(r.item_id, r.epoch) for r in rows if r.verdict != "clean"}
    clean_rows = [r for r in rows if (r.item_id, r.epoch) not in dirty_items]
    clean = _score(bench, items, clean_rows, void=False) if clean_rows else None
    categories: Counter = Counter()
    for r in rows:
        for f in r.findings:
            categories[f.get("category", "?")] += 1
    n_rows = max(len(rows), 1)
    return AgentDatasetScore(
        agent=agent,
        dataset=dataset,
        bench=bench,
        n=report.n,
        report=report,
        clean=clean,
        voided=voided,
        status_counts=dict(Counter(r.status for r in rows)),
        verdict_counts=dict(Counter(r.verdict for r in rows)),
        category_counts=dict(categories),
        tokens=sum(r.input_tokens + r.output_tokens for r in rows),
        cost_usd=sum(r.cost_usd for r in rows),
        mean_duration_s=sum(r.duration_s for r in rows) / n_rows,
        frames_decoded=sum(r.frames_decoded for r in rows),
        frames_model=sum(r.frames_model for r in rows),
    )


def score_run(rows: list[ResultRow], items_by_dataset: dict[str, list[Item]]) -> list[AgentDatasetScore]:
    """One AgentDatasetScore per (agent, dataset) present in the rows, in a stable order."""
    grouped: dict[tuple[str, str], list[ResultRow]] = defaultdict(list)
    for r in rows:
        grouped[(r.agent, r.dataset)].append(r)
    scores = []
    for (agent, dataset), group in sorted(grouped.items()):
        bench = group[0].bench
        scores.append(score_agent_dataset(agent, dataset, bench, items_by_dataset.get(dataset, []), group))
    return scores
