"""Measured trust's figures: impossible-item hits against chance and memorised twin pairs, per
(agent, dataset) and pooled per agent, with Wilson intervals; RUN_DIR/trust.json.

Why apart from the planning (`harness/trust.py`): the run needs the plan before any attempt, the
figures only once rows exist, and the report reads the figures without ever planning; the rendering
(terminal table, HTML) is `report/trust_view.py`.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from statebox.harness.store import ResultRow
from statebox.harness.trust import CHANCE_SAMPLES, ConfigLike, LoadedLike, TrustItem, TrustPlan, plan_for_run
from statebox.replace_file import replace_text
from statebox.schema import Item
from statebox.scoring import chance_response, score_query


def split_rows(rows: Iterable[ResultRow], plan: TrustPlan) -> tuple[list[ResultRow], list[ResultRow]]:
    """(rows the normal score counts, rows of impossible items and twins)."""
    ids = set(plan.by_id())
    normal: list[ResultRow] = []
    trust: list[ResultRow] = []
    for r in rows:
        (trust if r.item_id in ids else normal).append(r)
    return normal, trust


def wilson(hits: int, n: int) -> tuple[float, float] | None:
    """95% Wilson score interval (scipy's binomtest), good at rates near 0 and 1 with small n."""
    if n <= 0:
        return None
    from scipy.stats import binomtest  # scipy.stats costs ~0.5 s to import: only when a run has impossible items

    ci = binomtest(hits, n).proportion_ci(confidence_level=0.95, method="wilson")
    return (float(ci.low), float(ci.high))


def _correct(row: ResultRow) -> bool:
    return (row.metrics or {}).get("correct") == 1.0


def _hit_probability(t: TrustItem, query_index: int, items: list[Item], against: Item | None = None) -> float:
    """How often the `chance-random` baseline's response to `t.item` scores correct against
    `against` (default: the item itself), from CHANCE_SAMPLES seeded draws."""
    key = (t.bench, t.item.id, query_index, against.id if against else "", len(items))
    cached = _CHANCE.get(key)
    if cached is not None:  # the live view and the report recompute the figures often; the draws never change
        return cached
    rng = random.Random(f"chance|{t.item.id}|{query_index}|{against.id if against else ''}")
    hits = 0
    for _ in range(CHANCE_SAMPLES):
        response = chance_response(t.bench, t.item, query_index, items or [t.item], "random", rng)
        hits += score_query(t.bench, against or t.item, query_index, response).metrics.get("correct") == 1.0
    if len(_CHANCE) > 100_000:
        _CHANCE.clear()
    _CHANCE[key] = value = hits / CHANCE_SAMPLES
    return value


_CHANCE: dict[tuple[str, str, int, str, int], float] = {}


def _memorised_by_chance(t: TrustItem, original: Item, query_index: int, items: list[Item]) -> float:
    """The chance that a guesser makes a memorised pair: right on the source, and the source's truth on the twin."""
    as_source = TrustItem(kind="twin", label=t.label, bench=t.bench, item=original, source_id=original.id, construction="source")
    return _hit_probability(as_source, query_index, items) * _hit_probability(t, query_index, items, against=original)


class ImpossibleResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    n: int = 0
    hits: int = 0
    rate: float | None = None
    chance_rate: float | None = None
    ci: tuple[float, float] | None = None
    hit_attempts: list[str] = Field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The `run --json` entry: exactly n, hits, rate, chance_rate."""
        return {"n": self.n, "hits": self.hits, "rate": self.rate, "chance_rate": self.chance_rate}


class MemorisedPair(BaseModel):
    model_config = ConfigDict(extra="forbid")

    original: str  # attempt id on the source item
    twin: str  # attempt id on the twin
    answer: str
    construction: str


class CounterfactualResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    n: int = 0
    memorised: int = 0
    pairs: list[MemorisedPair] = Field(default_factory=list)
    chance_rate: float | None = None  # how often a guesser would make such a pair (chance-random)
    ci: tuple[float, float] | None = None  # Wilson 95% of memorised / n

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "memorised": self.memorised}


class TrustResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: str
    dataset: str
    impossible: ImpossibleResult
    counterfactual: CounterfactualResult


def trust_results(plan: TrustPlan, rows: Iterable[ResultRow], items_by_dataset: dict[str, list[Item]],
                  source_rows: Iterable[ResultRow] = ()) -> dict[tuple[str, str], TrustResult]:
    """Per (agent, dataset): impossible-item hits against chance, and memorised twins.

    `rows`: the trust rows (split_rows' second part); `source_rows`: the normal rows (a twin's
    source attempt is found among them: same agent, dataset, epoch and query)."""
    by_id = plan.by_id()
    sources = {(r.agent, r.dataset, r.item_id, r.query_index, r.epoch): r for r in source_rows}
    items = {(label, i.id): i for label, its in items_by_dataset.items() for i in its}
    chance_cache: dict[tuple[str, int], float] = {}
    out: dict[tuple[str, str], TrustResult] = {}
    chance_sums: dict[tuple[str, str], float] = defaultdict(float)
    cf_chance: dict[tuple[str, str], float] = defaultdict(float)
    for r in sorted(rows, key=lambda r: r.attempt_id):
        t = by_id.get(r.item_id)
        if t is None:
            continue
        key = (r.agent, r.dataset)
        res = out.setdefault(key, TrustResult(agent=r.agent, dataset=r.dataset, impossible=ImpossibleResult(),
                                              counterfactual=CounterfactualResult()))
        if t.kind == "impossible":
            ck = (t.item.id, r.query_index)
            if ck not in chance_cache:
                chance_cache[ck] = _hit_probability(t, r.query_index, items_by_dataset.get(t.label, []))
            res.impossible.n += 1
            chance_sums[key] += chance_cache[ck]
            if _correct(r):
                res.impossible.hits += 1
                res.impossible.hit_attempts.append(r.attempt_id)
            continue
        source = sources.get((r.agent, r.dataset, t.source_id, r.query_index, r.epoch))
        original = items.get((t.label, t.source_id))
        if source is None or original is None:
            continue
        res.counterfactual.n += 1
        ck = (t.item.id, r.query_index)
        if ck not in chance_cache:
            chance_cache[ck] = _memorised_by_chance(t, original, r.query_index, items_by_dataset.get(t.label, []))
        cf_chance[key] += chance_cache[ck]
        # memorised: right on the source, and on the twin (whose truth differs) the source's answer again
        as_original = score_query(t.bench, original, r.query_index, r.response or "").metrics.get("correct") == 1.0
        if as_original and _correct(source) and not _correct(r):
            res.counterfactual.memorised += 1
            res.counterfactual.pairs.append(MemorisedPair(original=source.attempt_id, twin=r.attempt_id,
                                                          answer=(r.response or "")[:200], construction=t.construction))
    for key, res in out.items():
        imp = res.impossible
        if imp.n:
            imp.rate = imp.hits / imp.n
            imp.chance_rate = round(chance_sums[key] / imp.n, 4)
            imp.ci = wilson(imp.hits, imp.n)
        cf = res.counterfactual
        if cf.n:
            cf.chance_rate = round(cf_chance[key] / cf.n, 4)
            cf.ci = wilson(cf.memorised, cf.n)
    return out


def flagged(result: TrustResult) -> list[str]:
    """Why an (agent, dataset) is not to be trusted: impossible-item hits, or memorised twin pairs,
    above what a guesser makes (the 95% interval's low end above the chance rate). Every
    memorised pair is evidence either way (trust.json); the flag says it is more than luck."""
    why = []
    imp = result.impossible
    if imp.n and imp.ci and imp.chance_rate is not None and imp.ci[0] > imp.chance_rate:
        why.append("impossible_hits")
    cf = result.counterfactual
    if cf.memorised and cf.ci and cf.chance_rate is not None and cf.ci[0] > cf.chance_rate:
        why.append("memorised")
    return why


def empty_result(agent: str, dataset: str) -> TrustResult:
    return TrustResult(agent=agent, dataset=dataset, impossible=ImpossibleResult(), counterfactual=CounterfactualResult())


def write_trust_file(run_dir: Path, plan: TrustPlan, results: dict[tuple[str, str], TrustResult]) -> Path:
    """RUN_DIR/trust.json: what was mixed in (kind, construction, source) and, per (agent, dataset),
    the figures with their evidence (hit attempt ids, memorised pairs). Rewritten whole each time."""
    path = Path(run_dir) / "trust.json"
    payload = {
        "items": [{"id": t.item.id, "kind": t.kind, "dataset": t.label, "source": t.source_id,
                   "construction": t.construction} for t in plan.items],
        "notes": plan.notes,
        "results": [r.model_dump() | {"flags": flagged(r)} for _, r in sorted(results.items())],
        "per_agent": [r.model_dump() | {"flags": flagged(r)} for _, r in sorted(pooled(results).items())],
    }
    replace_text(path, json.dumps(payload, indent=1, default=str))
    return path


@dataclass
class TrustOutcome:
    plan: TrustPlan
    results: dict[tuple[str, str], TrustResult]

    def entry(self, agent: str, dataset: str) -> dict[str, Any]:
        """The keys a `run --json` result gains."""
        r = self.results.get((agent, dataset)) or empty_result(agent, dataset)
        return {"impossible": r.impossible.to_json(), "counterfactual": r.counterfactual.to_json()}


def run_trust(config: ConfigLike, datasets: Sequence[LoadedLike], rows: Iterable[ResultRow],
              run_dir: Path | None = None) -> tuple[list[ResultRow], TrustOutcome | None]:
    """(the rows the normal score counts, the trust figures or None when the run mixed nothing in);
    writes RUN_DIR/trust.json when `run_dir` is given."""
    rows = list(rows)
    if config.trust is None or not config.trust.active:
        return rows, None
    plan = plan_for_run(config, datasets)
    normal, trust_rows = split_rows(rows, plan)
    items = {d.spec.label: d.items for d in datasets}
    results = trust_results(plan, trust_rows, items, normal)
    for agent in sorted({r.agent for r in rows}):
        for d in datasets:
            results.setdefault((agent, d.spec.label), empty_result(agent, d.spec.label))
    if run_dir is not None:
        write_trust_file(run_dir, plan, results)
    return normal, TrustOutcome(plan, results)


def pooled(results: dict[tuple[str, str], TrustResult]) -> dict[str, TrustResult]:
    """Per agent over all its datasets (dataset "all"): counts summed, chance rates weighted by n,
    intervals recomputed; more items, so more power than any one dataset's row."""
    out: dict[str, TrustResult] = {}
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for (agent, _), r in sorted(results.items()):
        acc = out.setdefault(agent, empty_result(agent, "all"))
        acc.impossible.n += r.impossible.n
        acc.impossible.hits += r.impossible.hits
        acc.impossible.hit_attempts += r.impossible.hit_attempts
        sums[agent][0] += (r.impossible.chance_rate or 0.0) * r.impossible.n
        acc.counterfactual.n += r.counterfactual.n
        acc.counterfactual.memorised += r.counterfactual.memorised
        acc.counterfactual.pairs += r.counterfactual.pairs
        sums[agent][1] += (r.counterfactual.chance_rate or 0.0) * r.counterfactual.n
    for agent, acc in out.items():
        imp, cf = acc.impossible, acc.counterfactual
        if imp.n:
            imp.rate, imp.chance_rate, imp.ci = imp.hits / imp.n, round(sums[agent][0] / imp.n, 4), wilson(imp.hits, imp.n)
        if cf.n:
            cf.chance_rate, cf.ci = round(sums[agent][1] / cf.n, 4), wilson(cf.memorised, cf.n)
    return out


def outcome_from_rows(plan: TrustPlan, trust_rows: list[ResultRow], items_by_dataset: dict[str, list[Item]],
                      source_rows: list[ResultRow]) -> TrustOutcome:
    """The report's figures from the rows its one pass kept (trust rows, twins' source rows)."""
    results = trust_results(plan, trust_rows, items_by_dataset, source_rows)
    for agent in sorted({r.agent for r in [*trust_rows, *source_rows]}):
        for label in items_by_dataset:
            results.setdefault((agent, label), empty_result(agent, label))
    return TrustOutcome(plan, results)
