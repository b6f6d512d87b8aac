"""The report's aggregation scores each epoch once and masks it into the clean, voided and
flagged-as-wrong views; every number must equal scoring each view's predictions through
`score_predictions` on its own (the pre-optimisation path), on a run with flagged and voided
attempts and several epochs."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest

from statebox.report.aggregate import ScoreAccumulator
from statebox.harness.store import ResultRow
from statebox.schema import ScoreReport
from statebox.scoring import score_predictions
from statebox.scoring.wrong_answers import wrong_answer

EPOCHS = 3
TOL = 1e-12


def _reference_view(bench: str, items: list, rows: list[ResultRow], *, void: bool, extras: bool,
                    flagged_wrong: bool = False) -> ScoreReport:
    """The old `_score_epoch`: the view's predictions through `score_predictions`."""
    answered = {r.item_id for r in rows}
    epoch_items = [i for i in items if i.id in answered]
    by_id = {i.id: i for i in epoch_items}

    def response(r: ResultRow) -> str:
        if flagged_wrong and r.verdict in ("suspicious", "contaminated"):
            return wrong_answer(bench, by_id[r.item_id], r.query_index)
        return r.response

    # a voided attempt answers nothing: its prediction is left out (the rule's missing answer)
    predictions = [{"id": r.item_id, "query_index": r.query_index, "response": response(r)} for r in rows
                   if not (void and r.action == "void")]
    return score_predictions(bench, epoch_items, predictions, n_boot=1000 if extras else 0, chance=extras)


def _mean(reports: list[ScoreReport]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Metric and group values averaged over epochs, missing values ignored (as `_EpochMean`)."""
    def avg(dicts: list[dict[str, Any]], keys) -> dict[str, Any]:
        out = {}
        for key in keys:
            values = [d[key] for d in dicts if d.get(key) is not None]
            out[key] = sum(values) / len(values) if values else None
        return out

    base = reports[0]
    if len(reports) == 1:
        return base.metrics, {g: v.metrics for g, v in base.groups.items()}
    metrics = avg([r.metrics for r in reports], base.metrics)
    groups = {g: avg([r.groups[g].metrics for r in reports if g in r.groups], v.metrics) for g, v in base.groups.items()}
    return metrics, groups


def _close(a: Any, b: Any, where: str) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for key in a:
            _close(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for k, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{where}[{k}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert a is not None and b is not None, f"{where}: {a} != {b}"
        assert (math.isnan(a) and math.isnan(b)) or abs(a - b) <= TOL, f"{where}: {a} != {b}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _rows(bench: str, dataset: str, items: list, rng: random.Random) -> list[ResultRow]:
    from statebox.agents.baselines import format_target

    rows = []
    for epoch in range(EPOCHS):
        for item in items:
            if rng.random() < 0.1:
                continue  # an item this epoch did not answer (a missing attempt)
            for position, query in enumerate(item.queries):
                target = query.target if query.target is not None else item.target
                roll = rng.random()
                if roll < 0.5:
                    response = format_target(item, target)
                elif roll < 0.6:
                    response = ""
                elif roll < 0.7:
                    response = "I cannot tell"
                else:
                    try:
                        response = str(int(float(target)) + rng.choice((-2, -1, 1)))
                    except (TypeError, ValueError):
                        response = rng.choice("ABCD")
                verdict, action = "clean", "none"
                audit = rng.random()
                if audit < 0.12:
                    verdict, action = "contaminated", "void"
                elif audit < 0.25:
                    verdict, action = "suspicious", "flag"
                rows.append(ResultRow(attempt_id=f"{dataset}-{item.id}-{position}-{epoch}", run_id="t", agent="a",
                                      dataset=dataset, bench=bench, item_id=item.id, query_index=position, epoch=epoch,
                                      response=response, verdict=verdict, action=action))
    return rows


def test_views_equal_score_predictions_per_view(tiny_suite):
    check_views_equal(tiny_suite)


def check_views_equal(suite: Path) -> None:
    from statebox.benchmarks import load_benchmark
    from statebox.harness.plan import datasets_from_suite

    tiny_suite = suite
    rng = random.Random(7)
    checked = set()
    actions: set[str] = set()
    for spec in datasets_from_suite(tiny_suite):
        items = load_benchmark(spec.bench, Path(spec.data), Path(spec.videos) if spec.videos else None).items
        rows = _rows(spec.bench, spec.label, items, rng)
        acc = ScoreAccumulator("a", spec.label, spec.bench, items)
        reference: dict[str, list[ScoreReport]] = {"all": [], "clean": [], "voided": [], "flagged_as_wrong": []}
        for epoch in range(EPOCHS):
            epoch_rows = [r for r in rows if r.epoch == epoch]
            if not epoch_rows:
                continue  # (the accumulator skips an epoch without rows)
            acc.add_epoch(epoch_rows)
            first = not reference["all"]
            reference["all"].append(_reference_view(spec.bench, items, epoch_rows, void=False, extras=first))
            reference["voided"].append(_reference_view(spec.bench, items, epoch_rows, void=True, extras=False))
            reference["flagged_as_wrong"].append(
                _reference_view(spec.bench, items, epoch_rows, void=False, extras=False, flagged_wrong=True))
            dirty = {r.item_id for r in epoch_rows if r.verdict != "clean"}
            clean_rows = [r for r in epoch_rows if r.item_id not in dirty]
            if clean_rows:
                reference["clean"].append(_reference_view(spec.bench, items, clean_rows, void=False, extras=False))
        result = acc.result()
        actions.update(r.action for r in rows)
        for view, got in (("all", result.report), ("clean", result.clean), ("voided", result.voided),
                          ("flagged_as_wrong", result.flagged_as_wrong)):
            if not reference[view]:
                assert got is None, view
                continue
            metrics, groups = _mean(reference[view])
            assert got is not None
            _close(got.metrics, metrics, f"{spec.label}/{view}.metrics")
            _close({g: v.metrics for g, v in got.groups.items()}, groups, f"{spec.label}/{view}.groups")
            assert {g: v.n for g, v in got.groups.items()} == {g: v.n for g, v in reference[view][0].groups.items()}
            assert got.n == reference[view][0].n
        first = reference["all"][0].model_extra or {}
        extra = result.report.model_extra or {}
        for key in ("ci", "chance", "parse_failures", "missing", "n_queries"):
            _close(extra.get(key), first.get(key), f"{spec.label}/all.{key}")
        assert result.report.warnings == sorted({w for r in reference["all"] for w in r.warnings}) or EPOCHS == 1
        flagged = result.flagged_as_wrong.metrics.get(result.headline)
        if flagged is not None and any(r.verdict != "clean" for r in rows):
            # counting flagged attempts wrong can only lower the score (no rule rewards the wrong answer)
            assert flagged <= result.report.metrics[result.headline] + TOL, (spec.label, flagged)
        checked.add(spec.bench)
    assert {"vstat", "vcbench", "cpbench"} <= checked, checked
    assert {"void", "flag", "none"} <= actions


def test_bootstrap_weight_cache_is_exact():
    """A second bootstrap on the same clusters reuses the drawn weights: same replicates."""
    import numpy as np

    from statebox.scoring import stats

    rng = np.random.default_rng(3)
    values = rng.random((500, 3))
    values[rng.random((500, 3)) < 0.2] = np.nan
    codes = rng.integers(0, 120, 500)
    stats._WEIGHTS.clear()
    first = stats.bootstrap_means(values, codes, n_boot=450, seed=5)
    assert stats._WEIGHTS
    again = stats.bootstrap_means(values, codes, n_boot=450, seed=5)
    stats._WEIGHTS.clear()
    cold = stats.bootstrap_means(values, codes, n_boot=450, seed=5)
    assert np.array_equal(first, again, equal_nan=True) and np.array_equal(first, cold, equal_nan=True)


@pytest.mark.parametrize("bench", ["cpbench"])
def test_restricted_columns_follow_the_subset(bench, tiny_suite):
    """CP-Bench's per-count columns exist only for counts the (clean) items have."""
    from statebox.benchmarks import load_benchmark
    from statebox.harness.plan import datasets_from_suite
    from statebox.scoring.rules import rules_for

    spec = next(s for s in datasets_from_suite(tiny_suite) if s.bench == bench)
    items = load_benchmark(spec.bench, Path(spec.data), Path(spec.videos) if spec.videos else None).items
    assert len(rules_for(bench).columns_for(items[:1])) <= len(rules_for(bench).columns_for(items))


def _eoc_items() -> list:
    from statebox.schema import Item, Query

    choices = {"a": "the red cup", "b": "the blue cup", "c": "the green cup", "d": "no cup"}
    closed = [Item(id=f"c{k}", benchmark="eocbench", video="v.mp4", question="Which cup?", answer_type="mcq",
                   target=[letter], queries=[Query(index=0, target=[letter])], labels={"choice_type": "single-choice"},
                   meta={"choices": choices}) for k, letter in enumerate("abab")]
    # an open time question whose target is 0: "" parses as time 0, every MSTA threshold hit
    timed = [Item(id="t0", benchmark="eocbench", video="v.mp4", question="How long ago?", answer_type="number",
                  target=0.0, queries=[Query(index=0, target=0.0)], labels={"choice_type": "open-ended"},
                  meta={"video_time": 10.0})]
    return closed + timed


def test_a_voided_eocbench_attempt_answers_nothing_not_the_option_empty_maps_to():
    """Voided means the attempt answers nothing (an abstention, not a right answer). On EOC-Bench the
    released parser maps "" to the most similar option (the first, every ratio being 0), so a voided
    answer stored as "" would score the first option: right on c0 and c2, and the time question whose
    target is 0. The voided view withdraws the prediction instead: those items score 0, and the view
    equals `score_predictions` on the predictions without the voided lines, through `score_run` and
    through the auditor's `adjusted_views`."""
    from statebox.audits.verdict import adjusted_views
    from statebox.report.aggregate import score_run
    from statebox.schema import Verdict
    from statebox.scoring import score_query

    items = _eoc_items()
    right = {"c0": "A", "c1": "B", "c2": "A", "c3": "B", "t0": "0"}
    void = {"c0", "c2", "t0"}
    for item in items:  # the premise: "" would have scored the voided items right
        assert score_query("eocbench", item, 0, "").metrics["correct"] == (1.0 if item.id in void else 0.0), item.id
    rows = [ResultRow(attempt_id=f"x-{i.id}", run_id="r", agent="x", dataset="d", bench="eocbench", item_id=i.id,
                      query_index=0, response=right[i.id], verdict="contaminated" if i.id in void else "clean",
                      action="void" if i.id in void else "none") for i in items]
    (score,) = score_run(rows, {"d": items})
    assert score.report.metrics["accuracy"] == 1.0
    kept = [{"id": r.item_id, "query_index": 0, "response": r.response} for r in rows if r.action != "void"]
    reference = score_predictions("eocbench", items, kept, n_boot=0, chance=False)
    _close(score.voided.metrics, reference.metrics, "eocbench/voided")
    assert abs(score.voided.metrics["accuracy"] - 2 / 5) <= TOL  # c1, c3 right; the voided three 0
    assert score.voided.metrics["closed_accuracy"] == 0.5 and score.voided.metrics["msta"] == 0.0
    assert score.voided.metrics["partial_acc"] == 0.5

    verdicts = {r.attempt_id: Verdict(attempt_id=r.attempt_id, verdict=r.verdict, action=r.action) for r in rows}
    views = adjusted_views([r.model_dump() for r in rows], verdicts)
    audited = score_predictions("eocbench", items, views.voided, n_boot=0, chance=False)
    _close(audited.metrics, reference.metrics, "eocbench/adjusted_views.voided")
