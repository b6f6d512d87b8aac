"""Every number of a VCBench full report (metrics, label groups, bootstrap CIs, chance baselines)
equals, to 1e-12, a slow straightforward reference computed here from the definitions.

The fast report shares work between its parts (one target array, one parse per distinct text,
label groups and cluster codes by array passes, the random baseline's `randint` draws taken from
the same Mersenne Twister words in bulk): the reference does none of that. It scores each question
in plain Python, groups by looping over items, draws the chance answers with `random.Random.randint`
one query at a time, and averages each bootstrap replicate from the very multinomial draws the
report's CIs come from (numpy's seeded `multinomial`, `stats.CHUNK` replicates per call).
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from statebox.schema import Item, Query
from statebox.scoring.randints import randint_sequence
from statebox.scoring.metrics import gpa_point
from statebox.scoring.parsing import vcbench_number
from statebox.scoring.report import score_predictions
from statebox.scoring.rules.vcbench import MOC_SUBTYPES, UDA_SUBTYPES
from statebox.scoring.stats import CHUNK

SUBTYPES = ["O1-Snap", "O1-Delta", "O2-Unique", "O2-Gain", "E1-Action", "E1-Transit", "E2-Periodic", "E2-Episode"]
COLUMNS = ("gpa", "moc", "uda", "exact_match", "invalid_rate")
TOLERANCE = 1e-12


def make_dataset(n_questions: int, seed: int) -> tuple[list[Item], list[dict]]:
    """Questions with 1-6 query points, subtypes in runs and alternating, per-subtype answer ranges
    that differ (several `randint` widths), multi-valued labels, clusters by video file and by
    video_id; predictions with garbage, number words, missing points, duplicates and (odd seeds)
    an unknown id."""
    rng = random.Random(seed)
    items, lines = [], []
    for q in range(n_questions):
        subtype = SUBTYPES[(q // 3) % len(SUBTYPES)] if q % 2 else SUBTYPES[q % len(SUBTYPES)]
        scale = {"E2-Episode": 7, "O1-Delta": 40, "O2-Gain": 1}.get(subtype, 2)
        count, queries = rng.randint(0, 3), []
        for k in range(rng.choice((1, 2, 5, 5, 5, 6))):
            count += rng.randint(0, scale)
            queries.append(Query(index=k, time=10.0 * (k + 1), target=count))
        labels = {"counting_subtype": subtype, "counting_type": subtype[:2]}
        if q % 7 == 0:
            labels["scene"] = "kitchen|street" if q % 2 else "kitchen"
        meta = {"video_id": f"vid{q // 4}"} if q % 3 == 0 else {}
        items.append(Item(id=f"q{q}", benchmark="vcbench", video=f"v{q // 3}.mp4", question="How many?",
                          answer_type="number", target=count, queries=queries, labels=labels, meta=meta))
        for query in queries:
            roll = rng.random()
            if roll < 0.02:
                continue  # missing
            if roll < 0.05:
                response = "I am not sure, maybe a few"
            elif roll < 0.08:
                response = f"I count {query.target + rng.randint(-1, 1)} of them"
            elif roll < 0.09:
                response = "three"
            else:
                response = str(query.target + rng.choice((0, 0, 0, 1, -1, 2, -3)))
            lines.append({"id": item_id(q), "query_index": query.index, "response": response})
    lines += [dict(line, response="0") for line in lines[:5]]  # duplicates: the last one wins
    if seed % 2:  # an unknown id: the predictions are matched line by line (else placed as arrays)
        lines.append({"id": "nobody", "query_index": 0, "response": "1"})
    return items, lines


def item_id(q: int) -> str:
    return f"q{q}"


# ------------------------------------------------------------------ the reference


def _sign(x: float) -> int:
    return 1 if x > 0 else (-1 if x < 0 else 0)


def reference_values(items: list[Item], parsed: dict[tuple[str, int], float | None]) -> list[dict[str, float]]:
    """Per question, from the definitions: an invalid or missing point scores GPA 0, a step
    touching it is a UDA mismatch and the first such step a MoC violation."""
    rows = []
    for item in items:
        p = [parsed.get((item.id, q.index)) for q in item.queries]
        g = [float(q.target) for q in item.queries]
        n, subtype = len(p), item.labels.get("counting_subtype", "")
        row = {
            "gpa": sum(0.0 if pi is None else gpa_point(pi, gi) for pi, gi in zip(p, g)) / n,
            "exact_match": sum(pi is not None and pi == gi for pi, gi in zip(p, g)) / n,
            "invalid_rate": sum(pi is None for pi in p) / n,
            "moc": math.nan,
            "uda": math.nan,
        }
        if n >= 2 and subtype in MOC_SUBTYPES:
            row["moc"] = 1.0
            for i in range(n - 1):
                if p[i] is None or p[i + 1] is None or p[i + 1] < p[i]:
                    row["moc"] = i / (n - 1)
                    break
        if n >= 2 and subtype in UDA_SUBTYPES:
            row["uda"] = sum(p[i] is not None and p[i + 1] is not None
                             and _sign(p[i + 1] - p[i]) == _sign(g[i + 1] - g[i]) for i in range(n - 1)) / (n - 1)
        rows.append(row)
    return rows


def reference_means(rows: list[dict[str, float]]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name in COLUMNS:
        counted = [row[name] for row in rows if not math.isnan(row[name])]
        out[name] = sum(counted) / len(counted) if counted else None
    return out


def reference_parse(items: list[Item], lines: list[dict]) -> dict[tuple[str, int], float | None]:
    known = {item.id for item in items}
    parsed: dict[tuple[str, int], float | None] = {}
    for line in lines:
        if line["id"] in known:
            value = vcbench_number(line["response"])
            parsed[(line["id"], line["query_index"])] = None if value is None else float(value)
    return parsed


def reference_chance(items: list[Item], kind: str, seed: int) -> dict[str, float | None]:
    groups: dict[str, list[float]] = {}
    for item in items:
        groups.setdefault(item.labels["counting_subtype"], []).extend(float(q.target) for q in item.queries)
    constants = {}
    for name, targets in groups.items():  # the best constant: the first integer maximising total GPA
        best, best_total = None, -1.0
        for c in range(math.floor(min(targets)), math.ceil(max(targets)) + 1):
            total = math.fsum(gpa_point(c, t) for t in targets)
            if total > best_total + 1e-12:
                best, best_total = c, total
        constants[name] = str(best)
    rng = random.Random(seed)
    parsed: dict[tuple[str, int], float | None] = {}
    for item in items:
        targets = groups[item.labels["counting_subtype"]]
        for q in item.queries:
            text = str(rng.randint(int(min(targets)), int(max(targets)))) if kind == "random" \
                else constants[item.labels["counting_subtype"]]
            value = vcbench_number(text)
            parsed[(item.id, q.index)] = None if value is None else float(value)
    means = reference_means(reference_values(items, parsed))
    return {key: means[key] for key in ("gpa", "moc", "uda")}


def reference_cluster(item: Item) -> str:
    video_id = item.meta.get("video_id")
    return f"vcbench:{video_id}" if video_id not in (None, "") else f"/{item.video}"


def reference_intervals(items: list[Item], rows: list[dict[str, float]], n_boot: int,
                        seed: int) -> dict[str, list[float] | None]:
    names = sorted({reference_cluster(item) for item in items})
    code = {name: k for k, name in enumerate(names)}
    clusters = [code[reference_cluster(item)] for item in items]
    rng = np.random.default_rng(seed)
    weights = np.concatenate([rng.multinomial(len(names), np.full(len(names), 1.0 / len(names)),
                                              size=min(CHUNK, n_boot - start)) for start in range(0, n_boot, CHUNK)])
    out: dict[str, list[float] | None] = {}
    for name in COLUMNS:
        kept = [(row[name], cluster) for row, cluster in zip(rows, clusters) if not math.isnan(row[name])]
        values = np.array([value for value, _ in kept])
        where = np.array([cluster for _, cluster in kept], dtype=np.int64)
        replicates = []
        for w in weights:  # each replicate: every question weighted by its video's multiplicity
            row_weights = w[where].astype(np.float64)
            if row_weights.sum():
                replicates.append(float(np.dot(row_weights, values) / row_weights.sum()))
        ordered = sorted(replicates)

        def percentile(q: float) -> float:
            h = (len(ordered) - 1) * q / 100
            low = math.floor(h)
            high = min(low + 1, len(ordered) - 1)
            return ordered[low] + (h - low) * (ordered[high] - ordered[low])

        out[name] = [percentile(2.5), percentile(97.5)] if ordered else None
    return out


def reference_report(items: list[Item], lines: list[dict], n_boot: int, seed: int) -> dict:
    rows = reference_values(items, reference_parse(items, lines))
    members: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        for key, value in item.labels.items():
            for part in str(value).split("|"):
                members.setdefault(f"{key}={part}", []).append(index)
    return {
        "metrics": reference_means(rows),
        "groups": {name: {"n": len(set(ks)), "metrics": reference_means([rows[k] for k in sorted(set(ks))])}
                   for name, ks in members.items()},
        "ci": reference_intervals(items, rows, n_boot, seed),
        "chance": {kind: reference_chance(items, kind, seed) for kind in ("random", "frequency")},
    }


# ------------------------------------------------------------------ the checks


def assert_close(got: object, want: object, where: str = "") -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), (where, got, want)
        for key in want:
            assert_close(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), (where, got, want)
        for k, (a, b) in enumerate(zip(got, want)):
            assert_close(a, b, f"{where}[{k}]")
    elif want is None:
        assert got is None, (where, got)
    else:
        assert got is not None and abs(float(got) - float(want)) <= TOLERANCE, (where, got, want)


@pytest.mark.parametrize("seed", [0, 3])
def test_full_report_equals_the_reference(seed: int) -> None:
    items, lines = make_dataset(4000, seed)  # ~19k predictions
    n_boot = 200
    report = score_predictions("vcbench", items, lines, n_boot=n_boot, seed=seed).model_dump(mode="json")
    want = reference_report(items, lines, n_boot, seed)
    got = {key: report[key] for key in want}
    assert_close(got, want)
    assert {k: v["n"] for k, v in report["groups"].items()} == {k: v["n"] for k, v in want["groups"].items()}
    assert list(report["groups"]) == sorted(want["groups"])
    n_points = sum(len(item.queries) for item in items)
    assert report["n_queries"] == n_points and report["missing"] > 0 and report["parse_failures"]["count"] > 0


@pytest.mark.parametrize("bounds", [
    [(0, 18)] * 50,
    [(0, 18), (3, 3), (0, 1), (-5, 40)] * 30,
    [(0, 2**31 - 1), (0, 2**32 - 2), (5, 2**31 + 5)] * 5 + [(1, 6)] * 300 + [(0, 1000)] * 7,
    [(0, 5), (7, 2**32 + 6)] * 3,  # a width of 2**32 takes two words: drawn one call at a time
    [],
])
def test_randint_sequence_draws_what_randint_draws(bounds: list[tuple[int, int]]) -> None:
    """The bulk draws equal `rng.randint` called once per pair, and leave the generator in the
    same state (the next draw agrees too)."""
    one_by_one, bulk = random.Random(11), random.Random(11)
    one_by_one.random()
    bulk.random()  # a state part way through the Mersenne Twister's block
    want = [one_by_one.randint(low, high) for low, high in bounds]
    lows = np.array([b[0] for b in bounds], dtype=np.int64)
    highs = np.array([b[1] for b in bounds], dtype=np.int64)
    got = randint_sequence(bulk, lows, highs)
    assert got.tolist() == want
    assert bulk.getstate() == one_by_one.getstate()
