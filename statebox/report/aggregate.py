"""From stored attempt rows to the numbers people read: scores per agent and dataset,
with the auditor's three views side by side.

Every score goes through the one shared scorer (`statebox.scoring`: its rules' `score_table`
and `report_from_table`, what `score_predictions` is made of), so a run's leaderboard and
`statebox score` on the same predictions agree exactly. Each epoch's attempts are scored
once; the other views are that table masked (clean) or with a few items re-scored (voided,
flagged as wrong) (`score_epoch_views`), equal to scoring each view's predictions on their own.
The four views (why: a score is only as good as its audit):
- `all`: every attempt as answered;
- `clean`: only items whose attempts the auditor found clean;
- `voided`: attempts whose verdict maps to the `void` action answer nothing: their prediction
  is withdrawn, so each rule scores the query as it scores a missing prediction (an abstention,
  never a right answer; not the empty string, which EOC-Bench's released parser maps to the
  most similar option and a VSTAT empty text target matches);
- `flagged_as_wrong`: every attempt the auditor flagged (suspicious or contaminated, whatever
  the policy's action) answers what the rules score wrong (`scoring.wrong_answers`): the
  score with each flagged attempt counted as a failure, as METR counts reward-hacked runs.
  Unlike `clean` it keeps the denominator, so an agent cannot raise it by being flagged.
Multiple epochs are scored one epoch at a time and averaged (`ScoreAccumulator` takes one
epoch at a time, so the report can stream a run of any size through it).

Two derived things ride on the scores (`add_comparisons`): a best-of row per budget sweep
(`mllm@frames=16`, `mllm@frames=32`, ... -> `mllm@best`, a copy of the best budget's
score: the papers report the best budget), and, per (agent, dataset), whether the agent
beats the best prior baseline there (the scorer's random/frequency chance values and the
baseline agents that ran: chance-*, query-index-prior, blind). That comparison is three-way
(`compare_with_prior`): above, not above, or too few items to tell, because at the sizes a
first run uses (two items per family) no interval can separate anything, and a sentence
calling a perfect oracle "not above chance" there says what the data cannot say.
"""

from __future__ import annotations

import copy
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import reduce
from operator import add, attrgetter
from typing import Any, Callable, Iterable, NamedTuple

import numpy as np

from statebox.collector import collector_paused
from statebox.harness.store import ResultRow
from statebox.schema import Item, ScoreReport
from statebox.scoring.chance import KINDS
from statebox.scoring.judge import make_judge
from statebox.scoring.predictions import PredictionLine, match
from statebox.scoring.report import (
    ItemIndex,
    chance_baseline_metrics,
    report_from_table,
    restrict_values,
    score_table,
    view_report,
)
from statebox.scoring.rules import rules_for
from statebox.scoring.wrong_answers import wrong_answer

# agents that never look at a video: the priors every other agent must beat
BASELINE_AGENTS = ("chance-random", "chance-frequency", "query-index-prior", "blind")
BEST_SUFFIX = "@best"

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
    flagged_as_wrong: ScoreReport | None = None  # None: built before the view existed (read as the score)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def flagged_view(self) -> ScoreReport:
        """The score with every flagged attempt counted wrong (the plain score where nothing is flagged)."""
        return self.flagged_as_wrong if self.flagged_as_wrong is not None else self.report

    @property
    def headline(self) -> str:
        return HEADLINE_METRIC.get(self.bench, next(iter(self.report.metrics), ""))

    @property
    def headline_value(self) -> float | None:
        value = self.report.metrics.get(self.headline)
        return None if value is None or value != value else float(value)  # NaN: no value

    @property
    def best_of(self) -> str | None:
        """For a sweep's best-of row, the variant whose score it repeats."""
        return self.extra.get("best_of")

    @property
    def is_baseline(self) -> bool:
        return base_agent(self.agent) in BASELINE_AGENTS

    def to_json(self) -> dict[str, Any]:
        """The `run --json` result entry (metrics named as `statebox score --json` names them)."""
        comparison: dict[str, Any] = {}
        if self.best_of is not None:
            comparison["best_of"] = self.best_of
            comparison["budgets"] = self.extra.get("budgets", {})
        if "prior" in self.extra:
            comparison["prior"] = self.extra["prior"]
            comparison["beats_prior"] = self.extra.get("beats_prior")  # true | false | null (too few items to tell)
            comparison["beats_prior_n"] = self.extra.get("beats_prior_n")
            comparison["beats_prior_reason"] = self.extra.get("beats_prior_reason")
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
            "flagged_as_wrong": self.flagged_view.metrics,
            "verdict_counts": self.verdict_counts,
            "audit_categories": self.category_counts,
            "ci": (self.report.model_extra or {}).get("ci"),
            "tokens": self.tokens,
            "cost_usd": round(self.cost_usd, 6),
            "mean_duration_s": round(self.mean_duration_s, 3),
            "frames_decoded": self.frames_decoded,
            "frames_model": self.frames_model,
            "baseline": self.is_baseline,
            **comparison,
        }


def base_agent(name: str) -> str:
    """`mllm@frames=16` -> `mllm` (agents/base.py:base_name; repeated here so a report does not
    import the agent registry)."""
    return name.split("@", 1)[0]


def best_priors(scores: list[AgentDatasetScore]) -> dict[str, tuple[float, str]]:
    """Per dataset, the best prior baseline and its name: the scorer's `random` and `frequency`
    chance values (scored by the same rules, over the items each agent answered) and every
    baseline agent that ran (chance-*, query-index-prior, blind)."""
    out: dict[str, tuple[float, str]] = {}

    def offer(dataset: str, value: Any, name: str) -> None:
        if value is None:
            return
        value = float(value)
        if value != value:
            return
        if dataset not in out or value > out[dataset][0]:
            out[dataset] = (value, name)

    for s in scores:
        if s.best_of is not None:
            continue
        chance = (s.report.model_extra or {}).get("chance") or {}
        for kind, metrics in chance.items():
            offer(s.dataset, (metrics or {}).get(s.headline), f"chance ({kind})")
        if s.is_baseline:
            offer(s.dataset, s.headline_value, s.agent)
    return out


Z95 = 1.959963984540054  # the two-sided 95% normal quantile, as scipy's Wilson interval uses


def wilson_low(hits: float, n: int) -> float:
    """The low end of the 95% Wilson score interval of HITS successes in N trials (closed form,
    equal to scipy's `binomtest(...).proportion_ci(method="wilson")`; no scipy import on the
    report's path). A perfect score's low end is n / (n + z^2): 0.34 at n=2, 0.72 at n=10."""
    if n <= 0:
        return 0.0
    p, z2 = hits / n, Z95 * Z95
    centre = p + z2 / (2 * n)
    spread = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z2 / n))


def compare_with_prior(value: float | None, ci: tuple[float, float] | None, n: int,
                       prior: float) -> tuple[bool | None, str]:
    """Above the best prior (True), not above it (False), or too few items to tell (None), with
    the reason in words.

    The test: the score's 95% CI low end (the report's bootstrap over items; the Wilson interval
    of the score at N items where no CI was computed) strictly above the prior's value. That
    test has no power when even a perfect score, N of N, would have a Wilson low end at or
    below the prior: then no result at this N could come out "above", so "not above" would
    say nothing about the agent, and the answer is None. (A prior at 100 leaves no room at
    any N.) Otherwise a perfect score's bootstrap CI is [1, 1], above the prior: an oracle is
    never "not above"."""
    perfect_low = wilson_low(n, n)
    if prior >= 1.0:
        return None, f"the prior already scores {100 * prior:.1f}: no score can be above it"
    if perfect_low <= prior:
        return None, (f"too few items to tell: at n={n} even a perfect score's 95% interval starts at "
                      f"{100 * perfect_low:.1f}, at or below the prior's {100 * prior:.1f}")
    if value is None:
        return False, "no score"
    if ci is not None and ci[0] is not None and ci[0] == ci[0]:  # NaN: no CI
        low, how = float(ci[0]), "95% CI"
    else:
        low, how = wilson_low(value * n, n), "95% Wilson interval"
    if low > prior:
        return True, f"{how} low end {100 * low:.1f} > prior {100 * prior:.1f} (n={n})"
    return False, f"{how} low end {100 * low:.1f} <= prior {100 * prior:.1f} (n={n})"


ABOVE, NOT_ABOVE, TOO_FEW, AT_CEILING = "above", "not above", "too few items to tell", "prior at 100"


def prior_outcome(s: AgentDatasetScore) -> str | None:
    """The row's comparison in the words every view prints (report, live view, terminal):
    ABOVE, NOT_ABOVE, TOO_FEW, AT_CEILING (a perfect prior: nothing can be above it), or None
    for a baseline or a dataset with no prior."""
    prior = s.extra.get("prior")
    if s.is_baseline or not prior:
        return None
    beats = s.extra.get("beats_prior")
    if beats is None:
        return AT_CEILING if prior["value"] >= 1.0 else TOO_FEW
    return ABOVE if beats else NOT_ABOVE


def _budget_order(s: AgentDatasetScore) -> tuple[str, float, str]:
    """`mllm@frames=16` before `mllm@frames=128` (numeric), frames before fps."""
    key, _, value = s.agent.partition("@")[2].partition("=")
    try:
        return key, float(value), s.agent
    except ValueError:
        return key, float("inf"), s.agent


def add_comparisons(scores: list[AgentDatasetScore]) -> list[AgentDatasetScore]:
    """The scores plus one best-of row per swept agent and dataset, every non-baseline row
    marked with the best prior on its dataset and whether it beats it (`compare_with_prior`:
    `extra.beats_prior` True / False / None, `beats_prior_n`, `beats_prior_reason`).

    A best-of row (`mllm@best`) is a copy of its best variant's score (ties: the smaller
    budget) with `extra.best_of` naming it and `extra.budgets` every
    variant's headline value; totals (attempts, flags, cost) must skip it (`best_of` set), as
    its attempts are its variant's. Idempotent: rows already derived are rebuilt."""
    rows = [s for s in scores if s.best_of is None]
    sweeps: dict[tuple[str, str], list[AgentDatasetScore]] = defaultdict(list)
    for s in rows:
        if "@" in s.agent:
            sweeps[(base_agent(s.agent), s.dataset)].append(s)
    derived = []
    for (agent, dataset), variants in sorted(sweeps.items()):
        if len(variants) < 2:
            continue
        variants.sort(key=_budget_order)
        ranked = [v for v in variants if v.headline_value is not None]
        best = max(ranked, key=lambda v: v.headline_value or 0.0) if ranked else variants[0]  # max keeps the first of ties
        row = copy.copy(best)
        row.agent = agent + BEST_SUFFIX
        row.extra = dict(best.extra, best_of=best.agent,
                         budgets={v.agent: v.headline_value for v in variants})
        derived.append(row)
    out = rows + derived
    priors = best_priors(out)
    for s in out:
        for key in ("prior", "beats_prior", "beats_prior_n", "beats_prior_reason"):
            s.extra.pop(key, None)
        if s.is_baseline or s.dataset not in priors:
            continue
        value, name = priors[s.dataset]
        ci = ((s.report.model_extra or {}).get("ci") or {}).get(s.headline)
        beats, reason = compare_with_prior(s.headline_value, tuple(ci) if ci else None, s.n, value)
        s.extra["prior"] = {"name": name, "value": value}
        s.extra.update(beats_prior=beats, beats_prior_n=s.n, beats_prior_reason=reason)
    return out


class _EpochMean:
    """The mean of per-epoch ScoreReports without keeping them.

    Metric values (and label groups) are averaged over epochs, ignoring missing values;
    the first epoch's report carries the extras (CIs, chance baselines, parse failures),
    so only that epoch pays for the bootstrap. One epoch passes through unchanged.
    """

    def __init__(self) -> None:
        self.base: ScoreReport | None = None
        self.count = 0
        self._sums: dict[str, list[float | int]] = {}
        self._group_sums: dict[str, dict[str, list[float | int]]] = {}
        self._warnings: set[str] = set()

    @property
    def wants_extras(self) -> bool:
        return self.base is None

    @staticmethod
    def _add(sums: dict[str, list[float | int]], metrics: dict[str, float | None]) -> None:
        for key, cell in sums.items():
            value = metrics.get(key)
            if value is not None:
                cell[0] += value
                cell[1] += 1

    def add(self, report: ScoreReport) -> None:
        if self.base is None:
            self.base = report
            self._sums = {k: [0, 0] for k in report.metrics}
            self._group_sums = {g: {k: [0, 0] for k in grp.metrics} for g, grp in report.groups.items()}
        self.count += 1
        self._add(self._sums, report.metrics)
        for key, sums in self._group_sums.items():
            if key in report.groups:
                self._add(sums, report.groups[key].metrics)
        self._warnings.update(report.warnings)

    def result(self) -> ScoreReport | None:
        if self.base is None or self.count == 1:
            return self.base

        def mean(sums: dict[str, list[float | int]]) -> dict[str, float | None]:
            return {k: (total / n if n else None) for k, (total, n) in sums.items()}

        out = self.base.model_copy(deep=True)
        out.metrics = mean(self._sums)
        for key, group in out.groups.items():
            group.metrics = mean(self._group_sums[key])
        out.warnings = sorted(self._warnings)
        return out


_CHANCE_CACHE: dict[tuple[str, tuple[str, ...]], tuple[list[Item], dict[str, Any]]] = {}


def _same_items(held: list[Item], items: list[Item]) -> bool:
    """Whether `items` are the very Item objects a cache entry was built from (a new list of them is fine).

    Why identity and not the ids: two datasets may share item ids and differ in labels, choices or targets (a suite
    copied and relabelled, an annotation file edited between two reports of one process); keyed by the ids alone, the
    second got the first's label groups and chance baselines. The report loads each dataset's items once and hands
    the same objects to every agent and view, so the entries still serve what they are for."""
    return held is items or (len(held) == len(items) and all(a is b for a, b in zip(held, items)))


def _chance(bench: str, items: list[Item]) -> dict[str, Any]:
    """The scorer's chance baselines for these items: they depend on the items only, so every
    agent (and the voided view) that answered the same items shares one computation."""
    key = (bench, tuple(i.id for i in items))
    entry = _CHANCE_CACHE.get(key)
    if entry is not None and _same_items(entry[0], items):
        return entry[1]
    rules = rules_for(bench)
    with collector_paused():
        found = {kind: chance_baseline_metrics(bench, rules, items, kind, 0) for kind in KINDS}
    if len(_CHANCE_CACHE) > 256:
        _CHANCE_CACHE.clear()
    _CHANCE_CACHE[key] = (list(items), found)
    return found


_INDEX_CACHE: dict[tuple[str, ...], Any] = {}


def _item_index(items: list[Item]) -> Any:
    """The dataset's `ItemIndex` (label groups, cluster codes, positions), shared by every agent (`_same_items`)."""
    key = tuple(i.id for i in items)
    found = _INDEX_CACHE.get(key)
    if found is None or not _same_items(found.items, items):
        found = ItemIndex(items)
        if len(_INDEX_CACHE) > 64:
            _INDEX_CACHE.clear()
        _INDEX_CACHE[key] = found
    return found


FLAGGED = frozenset({"suspicious", "contaminated"})  # verdicts the flagged-as-wrong view counts as failures


def _lines(rows: list[ResultRow], answer: Callable[[ResultRow], str | None] | None = None) -> list[Any]:
    """The rows as the scorer's prediction lines (what `match` stores as answers as they are);
    `answer` gives a row's response where a view replaces some, None where the view withdraws
    the row's prediction (no line: the rule's missing answer)."""
    if answer is not None:
        given = ((r, answer(r)) for r in rows)
        return [PredictionLine(r.item_id, r.query_index, text) for r, text in given if text is not None]
    return [PredictionLine(r.item_id, r.query_index, r.response or "") for r in rows]


def _voided_answer(row: ResultRow) -> str | None:
    """A voided attempt answers nothing: no prediction at all (None), the one answer every rule
    scores as none (VSTAT, EOC-Bench 0; VCBench, CP-Bench no count; EC-Bench an abstention out of
    the official denominators). The empty string is not that: EOC-Bench's released parser maps
    it to the most similar option (the first, with every ratio 0), which can be the right one."""
    return None if row.action == "void" else (row.response or "")


class EpochViews(NamedTuple):
    """One epoch's score views (module doc); `clean` is None when no item stayed clean."""

    all: ScoreReport
    clean: ScoreReport | None
    voided: ScoreReport
    flagged_as_wrong: ScoreReport


def _rescored(bench: str, epoch_items: list[Item], values: dict[str, Any], rows: list[ResultRow],
              changed: set[str], answer: Callable[[ResultRow], str | None], judge: Any,
              groups: dict[str, Any]) -> ScoreReport:
    """The view whose CHANGED items answer `answer(row)`: only those items are scored again (every
    rule scores an item from that item's own answers), the rest of the table is kept."""
    local = {item.id: k for k, item in enumerate(epoch_items)}
    sub_items = [i for i in epoch_items if i.id in changed]
    sub_rows = [r for r in rows if r.item_id in changed]
    answers, _ = match(sub_items, _lines(sub_rows, answer))
    sub = rules_for(bench).score_table(sub_items, answers, judge)
    at = np.fromiter((local[i.id] for i in sub_items), dtype=np.int64, count=len(sub_items))
    out = {}
    for name, column in values.items():
        column = column.copy()
        column[at] = sub.values[name] if name in sub.values else np.nan
        out[name] = column
    return view_report(bench, epoch_items, out, groups)


def score_epoch_views(bench: str, items: list[Item], rows: list[ResultRow], *, extras: bool,
                      judge: Any = None) -> EpochViews:
    """The four views of one epoch (all, clean-only, voided, flagged as wrong), each exactly what
    `score_predictions` gives for that view's predictions, from ONE scoring of the attempts.

    Every rule scores an item from that item's own answers, so: the clean view is the
    all-attempts table restricted to the clean items; the voided view is that table with the
    items holding a voided attempt re-scored (their voided predictions withdrawn); the flagged-as-wrong
    view, with the items holding a flagged attempt re-scored (their flagged answers replaced by
    `wrong_answer`), nothing else.
    Label groups and bootstrap clusters come from the dataset's `ItemIndex` (computed once);
    only the all-attempts view of a first epoch (`extras`) gets CIs and chance baselines.
    """
    index = _item_index(items)
    answered = {r.item_id for r in rows}
    positions = np.fromiter((k for k, i in enumerate(items) if i.id in answered), dtype=np.int64)
    epoch_items = [items[k] for k in positions]
    if bench == "ecbench" and judge is None:
        judge = make_judge("auto")
    table, warnings = score_table(bench, epoch_items, _lines(rows), judge)
    groups = index.groups_for(positions)
    if extras and epoch_items:
        report = report_from_table(bench, epoch_items, table, warnings, groups=groups, codes=index.codes_for(positions),
                                   chance_metrics=_chance(bench, epoch_items))
    else:
        report = report_from_table(bench, epoch_items, table, warnings, n_boot=0, chance=False, groups=groups)

    voided_ids = {r.item_id for r in rows if r.action == "void"}
    voided = (_rescored(bench, epoch_items, table.values, rows, voided_ids, _voided_answer, judge, groups)
              if voided_ids else report)

    flagged_ids = {r.item_id for r in rows if r.verdict in FLAGGED}
    if flagged_ids:
        by_id = {item.id: item for item in epoch_items}
        flagged = _rescored(bench, epoch_items, table.values, rows, flagged_ids,
                            lambda r: (wrong_answer(bench, by_id[r.item_id], r.query_index or 0)
                                       if r.verdict in FLAGGED else (r.response or "")), judge, groups)
    else:
        flagged = report

    dirty = {r.item_id for r in rows if r.verdict != "clean"}
    if not dirty:
        clean: ScoreReport | None = report
    else:
        keep = np.fromiter((i.id not in dirty for i in epoch_items), dtype=bool, count=len(epoch_items))
        if keep.any():
            clean_items = [i for i, k in zip(epoch_items, keep) if k]
            clean = view_report(bench, clean_items, restrict_values(bench, table.values, keep, clean_items),
                                index.groups_for(positions[keep]))
        else:
            clean = None
    return EpochViews(report, clean, voided, flagged)


_STATUS, _VERDICT, _ACTION = attrgetter("status"), attrgetter("verdict"), attrgetter("action")
_INPUT, _OUTPUT, _COST, _DURATION = (attrgetter("input_tokens"), attrgetter("output_tokens"), attrgetter("cost_usd"),
                                     attrgetter("duration_s"))
_DECODED, _MODEL = attrgetter("frames_decoded"), attrgetter("frames_model")


class ScoreAccumulator:
    """One (agent, dataset): fed one epoch of rows at a time, so memory holds one epoch, never the run.

    The four views are scored per epoch and averaged; an epoch with nothing voided (or
    nothing flagged) reuses the all-attempts report for that view instead of scoring again.
    Only the all-attempts view carries CIs and chance baselines (the others are read for
    their metrics only).
    """

    def __init__(self, agent: str, dataset: str, bench: str, items: list[Item]) -> None:
        self.agent, self.dataset, self.bench, self.items = agent, dataset, bench, items
        self._all, self._clean, self._voided, self._flagged = _EpochMean(), _EpochMean(), _EpochMean(), _EpochMean()
        self.status_counts: Counter = Counter()
        self.verdict_counts: Counter = Counter()
        self.category_counts: Counter = Counter()
        self.void_count = 0
        self.rows = 0
        self.epochs = 0
        self.tokens = 0
        self.cost_usd = 0.0
        self.duration_s = 0.0
        self.frames_decoded = 0
        self.frames_model = 0

    def add_epoch(self, rows: list[ResultRow]) -> None:
        """All rows of one epoch of this agent and dataset (epochs in increasing order)."""
        if not rows:
            return
        self.epochs += 1
        # C-level passes over the rows; the float totals add row by row from the running total,
        # in row order (the same sums as a loop of `+=`)
        self.status_counts.update(map(_STATUS, rows))
        self.verdict_counts.update(map(_VERDICT, rows))
        self.category_counts.update([f.get("category", "?") for r in rows if r.findings for f in r.findings])
        self.void_count += list(map(_ACTION, rows)).count("void")
        self.rows += len(rows)
        self.tokens += sum(map(_INPUT, rows)) + sum(map(_OUTPUT, rows))
        self.cost_usd = reduce(add, map(_COST, rows), self.cost_usd)
        self.duration_s = reduce(add, map(_DURATION, rows), self.duration_s)
        self.frames_decoded += sum(map(_DECODED, rows))
        self.frames_model += sum(map(_MODEL, rows))
        # one scoring of the epoch's attempts; the other views are read for their metrics only
        # (their CIs and chance baselines are shown nowhere)
        views = score_epoch_views(self.bench, self.items, rows, extras=self._all.wants_extras)
        self._all.add(views.all)
        self._voided.add(views.voided)
        self._flagged.add(views.flagged_as_wrong)
        if views.clean is not None:
            self._clean.add(views.clean)

    def result(self) -> AgentDatasetScore:
        report = self._all.result()
        assert report is not None, "no rows were added"
        voided = self._voided.result()
        assert voided is not None
        return AgentDatasetScore(
            agent=self.agent,
            dataset=self.dataset,
            bench=self.bench,
            n=report.n,
            report=report,
            clean=self._clean.result(),
            voided=voided,
            status_counts=dict(sorted(self.status_counts.items())),
            verdict_counts=dict(sorted(self.verdict_counts.items())),
            category_counts=dict(sorted(self.category_counts.items())),
            tokens=self.tokens,
            cost_usd=self.cost_usd,
            mean_duration_s=self.duration_s / max(self.rows, 1),
            frames_decoded=self.frames_decoded,
            frames_model=self.frames_model,
            flagged_as_wrong=self._flagged.result(),
            extra={"void_count": self.void_count, "rows": self.rows, "epochs": self.epochs},
        )


def score_agent_dataset(agent: str, dataset: str, bench: str, items: list[Item], rows: list[ResultRow]) -> AgentDatasetScore:
    acc = ScoreAccumulator(agent, dataset, bench, items)
    by_epoch: dict[int, list[ResultRow]] = defaultdict(list)
    for r in rows:
        by_epoch[r.epoch].append(r)
    for epoch in sorted(by_epoch):
        acc.add_epoch(by_epoch[epoch])
    return acc.result()


def score_run(rows: Iterable[ResultRow], items_by_dataset: dict[str, list[Item]]) -> list[AgentDatasetScore]:
    """One AgentDatasetScore per (agent, dataset) present in the rows, in a stable order."""
    grouped: dict[tuple[str, str], list[ResultRow]] = defaultdict(list)
    for r in rows:
        grouped[(r.agent, r.dataset)].append(r)
    scores = []
    for (agent, dataset), group in sorted(grouped.items()):
        bench = group[0].bench
        scores.append(score_agent_dataset(agent, dataset, bench, items_by_dataset.get(dataset, []), group))
    return add_comparisons(scores)
