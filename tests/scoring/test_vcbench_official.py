"""VCBench: the vectorised scorer against a plain per-question transcription of the released
`compute_metrics.py` semantics, and the reference file's trivial baselines on the real data."""

from __future__ import annotations

import math
import random
from collections import defaultdict

import pytest

from statebox.benchmarks import load_benchmark
from statebox.scoring import score_predictions, score_query

MOC = {"O2-Unique", "E1-Action", "E1-Transit", "E2-Periodic", "E2-Episode"}
UDA = MOC | {"O1-Snap"}


def released_semantics(items, preds):
    """Per question: GPA mean of exp terms; MoC i/(n-1) at first drop; UDA sign agreement; then means."""
    sign = lambda x: 1 if x > 0 else (-1 if x < 0 else 0)  # noqa: E731
    per = []
    for item in items:
        p = [preds[(item.id, q.index)] for q in item.queries]
        g = [q.target for q in item.queries]
        n = len(p)
        total = 0.0
        for pi, gi in zip(p, g):
            sigma = 0.05 * max(gi, 1)
            total += math.exp(-((pi - gi) ** 2) / (2 * sigma**2))
        moc = uda = None
        subtype = item.labels["counting_subtype"]
        if subtype in MOC and n >= 2:
            moc = 1.0
            for i in range(n - 1):
                if p[i + 1] < p[i]:
                    moc = i / (n - 1)
                    break
        if subtype in UDA and n >= 2:
            uda = sum(sign(p[i + 1] - p[i]) == sign(g[i + 1] - g[i]) for i in range(n - 1)) / (n - 1)
        per.append((subtype, total / n, moc, uda))
    overall = {}
    for k, name in ((1, "gpa"), (2, "moc"), (3, "uda")):
        vals = [r[k] for r in per if r[k] is not None]
        overall[name] = sum(vals) / len(vals)
    by_subtype = defaultdict(dict)
    for subtype in {r[0] for r in per}:
        for k, name in ((1, "gpa"), (2, "moc"), (3, "uda")):
            vals = [r[k] for r in per if r[0] == subtype and r[k] is not None]
            by_subtype[subtype][name] = sum(vals) / len(vals) if vals else None
    return overall, by_subtype


@pytest.fixture(scope="module")
def vcbench(shared_dir):
    return load_benchmark("vcbench", shared_dir / "benchmarks/vcbench/vcbench_eval.jsonl").items


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_released_semantics_on_random_predictions(vcbench, seed):
    rng = random.Random(seed)
    preds = {}
    lines = []
    for item in vcbench:
        for q in item.queries:
            kind = rng.random()
            if kind < 0.6:
                value = q.target + rng.choice([-2, -1, 0, 0, 0, 1, 3])
            elif kind < 0.8:
                value = rng.randint(-5, 150)
            else:
                value = round(q.target * rng.uniform(0.8, 1.2), 2)
            preds[(item.id, q.index)] = value
            lines.append({"id": item.id, "query_index": q.index, "response": str(value)})
    rng.shuffle(lines)
    report = score_predictions("vcbench", vcbench, lines, n_boot=0, chance=False)
    overall, by_subtype = released_semantics(vcbench, preds)
    for name in ("gpa", "moc", "uda"):
        assert report.metrics[name] == pytest.approx(overall[name], abs=1e-12)
        for subtype, values in by_subtype.items():
            got = report.groups[f"counting_subtype={subtype}"].metrics[name]
            if values[name] is None:
                assert got is None
            else:
                assert got == pytest.approx(values[name], abs=1e-12)


@pytest.mark.parametrize(
    ("make", "gpa", "moc", "uda"),
    [
        (lambda i, q: 0, 0.061, 1.0, 0.156),
        (lambda i, q: 1, 0.265, 1.0, 0.156),
        (lambda i, q: q.index + 1, 0.451, 1.0, 0.776),  # the index-counting leak, reference A7
        (lambda i, q: q.target + 1, 0.085, 1.0, 1.0),
        (lambda i, q: round(q.target * 1.05), 0.924, 1.0, 1.0),
        (lambda i, q: q.target, 1.0, 1.0, 1.0),
    ],
)
def test_reference_trivial_baselines(vcbench, make, gpa, moc, uda):
    lines = [{"id": i.id, "query_index": q.index, "response": str(make(i, q))} for i in vcbench for q in i.queries]
    metrics = score_predictions("vcbench", vcbench, lines, n_boot=0, chance=False).metrics
    assert metrics["gpa"] == pytest.approx(gpa, abs=5e-4)
    assert metrics["moc"] == pytest.approx(moc, abs=5e-4)
    assert metrics["uda"] == pytest.approx(uda, abs=5e-4)


def test_missing_and_garbage_answers_score_as_wrong(vcbench):
    item = next(i for i in vcbench if i.labels["counting_subtype"] == "E1-Action" and len(i.queries) >= 3)
    good = [{"id": item.id, "query_index": q.index, "response": str(q.target)} for q in item.queries]
    garbage = [dict(good[0], response="I can't tell")] + good[2:]  # point 1 missing, point 0 garbage
    report = score_predictions("vcbench", [item], garbage, n_boot=0, chance=False)
    n = len(item.queries)
    assert report.metrics["gpa"] == pytest.approx((n - 2) / n)
    assert report.metrics["moc"] == 0.0  # the first step touches an invalid point
    assert report.metrics["uda"] == pytest.approx((n - 3) / (n - 1))
    assert report.model_extra["parse_failures"]["count"] == 1
    assert report.model_extra["missing"] == 1
    assert any("no prediction" in w for w in report.warnings)


def test_score_query_per_point(vcbench):
    item = vcbench[0]
    q = item.queries[0]
    row = score_query("vcbench", item, 0, f"The answer is {q.target}")
    assert row.parse_ok and row.metrics["correct"] == 1.0 and row.metrics["gpa"] == 1.0
    row = score_query("vcbench", item, 0, "nothing")
    assert not row.parse_ok and row.metrics["gpa"] == 0.0
