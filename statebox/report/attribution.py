"""The failure-mode diagnostic in the report: per parent item, the first step that went wrong.

The `failure` variant (`statebox bench variants SUITE --kind failure`, benchmarks/synthetic/
failure.py) asks, per item of the source suite (the *parent*), probes that isolate event
recognition (did event e happen?), entity association (which object did it?) and state update
(state after event e), and then the item's own question (`final`); each probe item carries
`meta.parent` and `meta.probe_step`. Per-step accuracy alone does not say why a final answer
was wrong; attributing each parent to its first failing step (`variants.attribute`: steps in
`variants.STEPS` order, a wrong final with every probe right is `final`, every step right is
`correct`) does. A parent whose final is right but a probe wrong is counted at that probe (a lucky
or shortcut final: `correct` means every step right).

Correctness is the one shared scorer's: each attempt's stored `metrics["correct"]`
(`scoring.score_query`, the value the attempt table shows as ✓), the all-attempts view (a
voided answer counts as given). An item is right in an epoch when every query of it attempted
in that epoch is right. A parent is attributed in an epoch only once each of its steps has an
attempt there (a run in progress, or `statebox view`, leaves the rest out rather than calling
an unanswered step wrong).

Epochs: each epoch is attributed on its own (`by_epoch`); the figure the report and its JSON
lead with (`counts`) is the FIRST epoch's, like the leaderboard's confidence interval and
chance baselines: attributions do not average (a parent is one step or another), and summing
epochs would count a parent several times. With several epochs the HTML table shows each.

Streaming: `AttributionAccumulator` is fed the epoch rows the report's pass already holds
(`report_data.ReportPass`) and keeps only per-epoch counts, so the report still never holds a
run's rows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from types import ModuleType
from typing import Iterable

from statebox.harness.store import ResultRow
from statebox.schema import Item

CORRECT = "correct"


def outcomes() -> tuple[str, ...]:
    """The attribution's categories, in order: the steps, then `correct`."""
    return (*_variants().STEPS, CORRECT)


def _variants() -> ModuleType:
    # a report of a run without failure-mode probes must not pay for the generator's import
    from statebox.benchmarks.synthetic import variants  # why: the generator pulls in cv2 and PyAV (~0.3 s)

    return variants


def probe_parents(items: Iterable[Item]) -> dict[str, list[Item]]:
    """parent id -> its probe items (those carrying both `parent` and `probe_step`), in item order;
    empty for a dataset that is not a failure-mode variant."""
    out: dict[str, list[Item]] = {}
    for item in items:
        meta = item.meta or {}
        parent, step = meta.get("parent"), meta.get("probe_step")
        if parent and step:
            out.setdefault(str(parent), []).append(item)
    return out


def epoch_attribution(parents: dict[str, list[Item]], rows: Iterable[ResultRow]) -> dict[str, int]:
    """One epoch's rows -> {outcome: number of parents}, every outcome present (zeros included)."""
    right: dict[str, bool] = {}
    for r in rows:
        value = (r.metrics or {}).get("correct")
        ok = value is not None and value >= 0.999  # the attempt table's ✓ (report_data.index_row)
        right[r.item_id] = right.get(r.item_id, True) and ok
    complete = [item for probes in parents.values() if all(p.id in right for p in probes) for item in probes]
    verdicts = _variants().attribute(complete, right) if complete else {}
    counts = Counter(verdicts.values())
    return {name: counts.get(name, 0) for name in outcomes()}


@dataclass
class FailureAttribution:
    """One (agent, dataset) of a failure-mode variant: per epoch, parents by first failing step."""

    agent: str
    dataset: str
    parents: int  # parent items in the dataset (as the run loaded it)
    by_epoch: dict[int, dict[str, int]] = field(default_factory=dict)

    @property
    def first_epoch(self) -> int | None:
        return min(self.by_epoch) if self.by_epoch else None

    @property
    def counts(self) -> dict[str, int]:
        """The first epoch's counts (see the module docstring for why not a combination)."""
        first = self.first_epoch
        return dict(self.by_epoch[first]) if first is not None else {name: 0 for name in outcomes()}

    @property
    def attributed(self) -> int:
        return sum(self.counts.values())


class AttributionAccumulator:
    """One (agent, dataset): fed one epoch of rows at a time (the rows the report's pass holds)."""

    def __init__(self, agent: str, dataset: str, parents: dict[str, list[Item]]) -> None:
        self._found = FailureAttribution(agent, dataset, len(parents))
        self.parents = parents

    def add_epoch(self, epoch: int, rows: list[ResultRow]) -> None:
        if rows:
            self._found.by_epoch[int(epoch)] = epoch_attribution(self.parents, rows)

    def result(self) -> FailureAttribution:
        return self._found


def attribution_json(found: Iterable[FailureAttribution]) -> dict[str, dict[str, dict[str, int]]]:
    """`{agent: {dataset: {step: n}}}` (first epoch), the `failure_attribution` key of `report --json`."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for a in found:
        out.setdefault(a.agent, {})[a.dataset] = a.counts
    return out


def attribute_rows(rows: Iterable[ResultRow], items_by_dataset: dict[str, list[Item]]) -> list[FailureAttribution]:
    """The same attribution from rows already in memory (`run --json`, which holds them anyway)."""
    probes = {label: p for label, items in items_by_dataset.items() if (p := probe_parents(items))}
    grouped: dict[tuple[str, str], dict[int, list[ResultRow]]] = {}
    for r in rows:
        if r.dataset in probes:
            grouped.setdefault((r.agent, r.dataset), {}).setdefault(r.epoch, []).append(r)
    out = []
    for (agent, dataset), epochs in sorted(grouped.items()):
        acc = AttributionAccumulator(agent, dataset, probes[dataset])
        for epoch in sorted(epochs):
            acc.add_epoch(epoch, epochs[epoch])
        out.append(acc.result())
    return out
