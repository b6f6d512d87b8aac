"""How fast does statebox score VCBench-style predictions? (scoring must never be a run's bottleneck)

Generates 1,000,000 query-point predictions (200,000 streaming questions x 5
points, all eight subtypes, ~3% garbage answers) and measures, in the same run:

- statebox core: predictions matched to queries, parsed, GPA/MoC/UDA per question, means;
- statebox full report: the above plus label breakdowns, 1000-replicate clustered bootstrap
  CIs and the two chance baselines (what `statebox score` does);
- peer A: reading the same predictions JSONL with `json.loads` per line (the floor of any scorer);
- peer B: a naive per-row pure-Python scorer of the same metrics (the released
  compute_metrics.py style), on the same predictions.

Prints predictions/second for each and the ratios, in CPU seconds of this process (the machine is
shared: wall time measures the neighbours); the last line is one JSON object with the figures
(`ratio_core_vs_json`, `ratio_full_vs_json`; targets >= 1 and >= 0.5). Reading the file into
prediction lines (`load_predictions`, the part `statebox score` adds) is timed apart.

Also timed: the full report again on a fresh list of the same items (`full_cold`: nothing cached by
the items list's identity from the calls before it, as in one `statebox score` run), and apart: the
bootstrap's resampling draws alone, 1000 x clusters, the very draws the report's CIs come from
(`draws`: as the report draws them, `stats.MultinomialSampler` into one float64 buffer, compiled by
numba for a draw this big, numba already loaded by the report; `draws_numpy`: numpy's seeded
`multinomial` a chunk at a time, as the report drew them before: the same integers, checked here on
the last chunk and the generator's state after; `ratio_full_floor_vs_json` is the most the full
report could reach while its numbers stay the same, everything else costing nothing), and what
loading numba's compiled draws costs a fresh process once (`numba_load`, from numba's cache: its
import and first call; part of `full`).
Usage: .venv/bin/python perf/score_throughput.py [N]
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from statebox.schema import Item, Query
from statebox.scoring.multinomial import MultinomialSampler
from statebox.scoring.predictions import load_predictions
from statebox.scoring.report import cluster_of, score_predictions, score_table
from statebox.scoring.stats import CHUNK

SUBTYPES = ["O1-Snap", "O1-Delta", "O2-Unique", "O2-Gain", "E1-Action", "E1-Transit", "E2-Periodic", "E2-Episode"]
POINTS = 5


def make_items(n_questions: int, rng: random.Random) -> list[Item]:
    items = []
    for q in range(n_questions):
        subtype = SUBTYPES[q % len(SUBTYPES)]
        count, queries = rng.randint(0, 3), []
        for k in range(POINTS):
            count += rng.randint(0, 3)
            queries.append(Query(index=k, time=10.0 * (k + 1), target=count))
        items.append(Item(id=f"q{q}", benchmark="vcbench", video=f"v{q // 3}.mp4", question="How many?",
                          answer_type="number", target=count, queries=queries,
                          labels={"counting_subtype": subtype, "counting_type": subtype[:2]}))
    return items


def write_predictions(items: list[Item], path: Path, rng: random.Random) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for item in items:
            for q in item.queries:
                roll = rng.random()
                if roll < 0.03:
                    response = "I am not sure, maybe a few"
                elif roll < 0.10:
                    response = f"There are {q.target + rng.randint(-1, 1)} of them."
                else:
                    response = str(q.target + rng.choice((0, 0, 0, 1, -1, 2)))
                handle.write(json.dumps({"id": item.id, "query_index": q.index, "response": response}) + "\n")


def naive_scores(items: list[Item], lines: list[dict]) -> dict[str, float]:
    """Per row and per question in plain Python, as the released compute_metrics.py does it."""
    preds: dict[tuple[str, int], float] = {}
    for line in lines:
        try:
            preds[(line["id"], line["query_index"])] = int(line["response"])
        except ValueError:
            numbers = [t.strip(".") for t in line["response"].split() if t.strip(".").lstrip("-").isdigit()]
            preds[(line["id"], line["query_index"])] = int(numbers[-1]) if numbers else float("nan")
    sign = lambda x: 1 if x > 0 else (-1 if x < 0 else 0)  # noqa: E731
    gpas, mocs, udas = [], [], []
    for item in items:
        p = [preds.get((item.id, q.index), float("nan")) for q in item.queries]
        g = [q.target for q in item.queries]
        total = 0.0
        for pi, gi in zip(p, g):
            if pi == pi:
                sigma = 0.05 * max(gi, 1)
                total += math.exp(-((pi - gi) ** 2) / (2 * sigma**2))
        gpas.append(total / len(p))
        if item.labels["counting_subtype"] not in ("O1-Delta", "O2-Gain", "O1-Snap"):
            v = 1.0
            for i in range(len(p) - 1):
                if not (p[i + 1] == p[i + 1] and p[i] == p[i]) or p[i + 1] < p[i]:
                    v = i / (len(p) - 1)
                    break
            mocs.append(v)
        if item.labels["counting_subtype"] not in ("O1-Delta", "O2-Gain"):
            udas.append(sum(p[i] == p[i] and p[i + 1] == p[i + 1] and sign(p[i + 1] - p[i]) == sign(g[i + 1] - g[i])
                            for i in range(len(p) - 1)) / (len(p) - 1))
    return {"gpa": sum(gpas) / len(gpas), "moc": sum(mocs) / len(mocs), "uda": sum(udas) / len(udas)}


def main() -> None:
    n_predictions = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    rng = random.Random(0)
    items = make_items(n_predictions // POINTS, rng)
    n = len(items) * POINTS
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "predictions.jsonl"
        write_predictions(items, path, rng)

        clock = time.process_time
        start = clock()
        with path.open(encoding="utf-8") as handle:
            raw = [json.loads(line) for line in handle]
        json_s = clock() - start

        start = clock()
        lines = load_predictions(path)
        load_s = clock() - start

    start = clock()
    table, _ = score_table("vcbench", items, lines)
    core_s = clock() - start

    start = clock()
    report = score_predictions("vcbench", items, lines, n_boot=1000)
    full_s = clock() - start

    # The same report of a fresh list of the same items: nothing kept from the calls above (the
    # query layout, targets and chance statistics are cached by the items list's identity), as a
    # single `statebox score` run computes it.
    start = clock()
    cold = score_predictions("vcbench", list(items), lines, n_boot=1000)
    full_cold_s = clock() - start
    assert cold.model_dump() == report.model_dump()

    n_clusters = len({cluster_of(item) for item in items})
    probabilities = np.full(n_clusters, 1.0 / n_clusters)
    start = clock()
    draw_rng = np.random.default_rng(0)  # as stats.bootstrap_means draws them
    sampler = MultinomialSampler(n_clusters, probabilities, 1000 * n_clusters)
    buffer = np.empty((CHUNK, n_clusters))
    for first in range(0, 1000, CHUNK):
        drawn = sampler(draw_rng, min(CHUNK, 1000 - first), buffer[: min(CHUNK, 1000 - first)])
    draws_s = clock() - start
    start = clock()
    numpy_rng = np.random.default_rng(0)  # as the report drew them before
    for first in range(0, 1000, CHUNK):
        counts = numpy_rng.multinomial(n_clusters, probabilities, size=min(CHUNK, 1000 - first))
    draws_numpy_s = clock() - start
    assert np.array_equal(drawn, counts) and draw_rng.bit_generator.state == numpy_rng.bit_generator.state
    numba_load_s = float(subprocess.run(
        [sys.executable, "-c", "import time; from statebox.scoring.multinomial import _kernels; "
         "start = time.process_time(); _kernels(); print(time.process_time() - start)"],
        capture_output=True, text=True, check=True).stdout)

    sample_items, sample_lines = items, raw  # the peer scores the very same million predictions
    start = clock()
    naive = naive_scores(sample_items, sample_lines)
    naive_s = clock() - start
    check = score_predictions("vcbench", sample_items, sample_lines, n_boot=0, chance=False).metrics
    for key in ("gpa", "moc", "uda"):
        assert abs(check[key] - naive[key]) < 1e-9, (key, check[key], naive[key])

    rate = lambda count, seconds: count / seconds  # noqa: E731
    core_rate, full_rate = rate(n, core_s), rate(n, full_s)
    json_rate, naive_rate = rate(n, json_s), rate(len(sample_lines), naive_s)
    print(f"predictions: {n:,} VCBench query points ({len(items):,} questions); gpa={report.metrics['gpa']:.4f}")
    print(f"statebox core scoring      : {core_rate:12,.0f} predictions/s  ({core_s:.2f} s CPU)")
    print(f"statebox full report       : {full_rate:12,.0f} predictions/s  ({full_s:.2f} s; CIs x1000, chance, groups)")
    print(f"peer A json.loads per line : {json_rate:12,.0f} predictions/s  ({json_s:.2f} s CPU)")
    print(f"peer B naive pure Python   : {naive_rate:12,.0f} predictions/s  (same numbers to 1e-9)")
    print(f"ratio core / naive         : {core_rate / naive_rate:6.2f}x")
    print(f"ratio core / json parsing  : {core_rate / json_rate:6.2f}x")
    print(f"ratio full report / json   : {full_rate / json_rate:6.2f}x")
    print(f"load_predictions (reading)  : {rate(n, load_s):12,.0f} predictions/s  ({load_s:.2f} s, not in core/full)")
    print(f"bootstrap draws alone       : {draws_s:.2f} s CPU for 1000 x {n_clusters:,} clusters "
          f"(compiled: {'yes' if sampler.fast else 'no, numpy: a small draw or no numba'}; numpy's multinomial {draws_numpy_s:.2f} s; "
          f"full report / json at most {json_s / draws_s:.2f}x with the same draws)")
    print(f"numba's compiled draws load : {numba_load_s:.2f} s CPU once per process (import and first call, cached)")
    print(f"full report beyond the draws: {full_s - draws_s:.2f} s CPU (core included); "
          f"with nothing cached from core: {full_cold_s:.2f} s, ratio {json_s / full_cold_s:.2f}x")
    print(json.dumps({
        "predictions": n, "cpu_s": {"json": round(json_s, 3), "load": round(load_s, 3), "core": round(core_s, 3),
                                    "full": round(full_s, 3), "naive": round(naive_s, 3),
                                    "draws": round(draws_s, 3), "draws_numpy": round(draws_numpy_s, 3),
                                    "numba_load": round(numba_load_s, 3), "full_cold": round(full_cold_s, 3)},
        "core_per_s": round(core_rate), "full_per_s": round(full_rate), "json_per_s": round(json_rate),
        "ratio_core_vs_json": round(core_rate / json_rate, 3), "ratio_full_vs_json": round(full_rate / json_rate, 3),
        "ratio_core_vs_naive": round(core_rate / naive_rate, 3),
        "ratio_load_and_core_vs_json": round(json_s / (load_s + core_s), 3),
        "ratio_full_floor_vs_json": round(json_s / draws_s, 3),
        "ratio_full_cold_vs_json": round(json_s / full_cold_s, 3),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }))


if __name__ == "__main__":
    main()
