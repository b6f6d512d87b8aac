"""The compiled multinomial draw (`scoring/multinomial.py`) gives numpy's very integers.

Every draw is held to `np.random.default_rng(seed).multinomial(n, pvals, size=rows)` with
`np.array_equal`, and the generator to numpy's state after it (the next double drawn is the same):
uniform probabilities over 1 .. 66,667 clusters, non-uniform ones, zeros, a first probability
above 0.5 or of 1, few trials (the row ends early), many (numpy's BTPE instead of inversion),
draws one after another on one generator. The table that decides most binomials without numpy's
loop is held to numpy's loop at the U where its answer changes, on every range of p it serves.
The bootstrap's replicates are the ones numpy's draws give.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("numba")

from numba import njit  # noqa: E402

from statebox.scoring import multinomial, stats  # noqa: E402
from statebox.scoring import multinomial_kernels as kernels  # noqa: E402
from statebox.scoring.multinomial import MultinomialSampler  # noqa: E402


def _same_as_numpy(n: int, pvals: np.ndarray, sizes: list[int], seed: int, *, exact: bool = False,
                   dtype: type = np.int64) -> MultinomialSampler:
    sampler = MultinomialSampler(n, pvals, fast=True, exact=exact)
    assert sampler.fast
    want, got = np.random.default_rng(seed), np.random.default_rng(seed)
    for size in sizes:  # one after another on the same generator
        expected = want.multinomial(n, pvals, size=size)
        out = np.full((size, len(pvals)), -7, dtype=dtype)  # every entry is written
        drawn = sampler(got, size, out)
        assert drawn is out
        assert np.array_equal(drawn, expected), (n, len(pvals), seed, size, np.argwhere(drawn != expected)[:5])
    assert got.random() == want.random()  # the stream left where numpy leaves it
    assert got.bit_generator.state == want.bit_generator.state
    return sampler


@pytest.mark.parametrize("clusters", [1, 2, 3, 7, 31, 1000, 5000, 20_000, 66_667])
def test_uniform_clusters_as_the_bootstrap_draws_them(clusters: int) -> None:
    pvals = np.full(clusters, 1.0 / clusters)
    sizes = [3, 1, 2] if clusters > 10_000 else [32, 1, 7]
    for seed in range(3 if clusters > 10_000 else 6):
        _same_as_numpy(clusters, pvals, sizes, seed)
        _same_as_numpy(clusters, pvals, sizes[:1], seed, dtype=np.float64)
        _same_as_numpy(clusters, pvals, sizes[:1], seed, exact=True)


def test_the_table_decides_most_binomials_of_a_large_draw() -> None:
    """66,667 clusters: the steps up to p = 2**-10 (98%) are in the table's ranges."""
    sampler = MultinomialSampler(66_667, np.full(66_667, 1.0 / 66_667), fast=True)
    xmin = sampler._params[5]
    assert 0.97 < np.isfinite(xmin).mean() < 0.99


@pytest.mark.parametrize("n_factor", [0.0, 0.001, 0.1, 1.0, 3.0, 50.0])
def test_trials_other_than_clusters(n_factor: float) -> None:
    """Few trials (rows end early, most categories 0), many (p * n > 30: BTPE)."""
    for d in (10, 2000, 30_000):
        n = int(n_factor * d)
        _same_as_numpy(n, np.full(d, 1.0 / d), [4, 3], seed=d + n)


@pytest.mark.parametrize("pvals", [
    [0.5, 0.5], [0.9, 0.1], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.99, 0.005, 0.005], [0.3, 0.0, 0.7],
    [0.25, 0.25, 0.25, 0.25], [0.0], [1.0], [0.2, 0.3, 0.9],  # the last entry is ignored, as numpy does
])
@pytest.mark.parametrize("n", [0, 1, 5, 40, 1000, 10**7])
def test_small_and_odd_probabilities(pvals: list[float], n: int) -> None:
    _same_as_numpy(n, np.asarray(pvals), [5, 2], seed=n)


def test_btpe_many_times() -> None:
    """numpy's BTPE (p * n > 30), every rejection branch: few categories, many trials."""
    for seed in range(20):
        for d, n in ((2, 1000), (3, 100), (50, 10**5), (7, 31 * 7), (2, 10**12)):
            _same_as_numpy(n, np.full(d, 1.0 / d), [10, 5], seed)


def test_non_uniform_probabilities() -> None:
    rng = np.random.default_rng(2024)
    for trial in range(30):
        d = int(rng.integers(2, 40_000))
        pvals = rng.dirichlet(np.full(d, rng.choice([0.05, 1.0, 20.0])))
        pvals[rng.random(d) < 0.05] = 0.0
        pvals /= math.fsum(pvals.tolist()) * (1 + 1e-15)
        n = int(rng.integers(0, 3 * d))
        _same_as_numpy(n, pvals, [3, 2], seed=trial)


def test_numpy_is_asked_where_the_fast_draw_does_not_apply() -> None:
    """Refused inputs raise numpy's error; a subclassed Generator, small draws and no numba get numpy's call."""
    for bad_n, bad_p in ((5, [0.7, 0.7, 0.1]), (5, [-0.1, 1.1]), (-1, [0.5, 0.5]), (5, [0.5, np.nan, 0.5])):
        sampler = MultinomialSampler(bad_n, np.asarray(bad_p), fast=True)
        assert not sampler.fast
        with pytest.raises(ValueError):
            np.random.default_rng(0).multinomial(bad_n, bad_p, size=2)
        with pytest.raises(ValueError):
            sampler(np.random.default_rng(0), 2)
    rows_of_pvals = np.array([[0.5, 0.5], [0.1, 0.9]])  # numpy's broadcasting over pvals: its own call
    sampler = MultinomialSampler(5, rows_of_pvals, fast=True)
    assert not sampler.fast
    assert np.array_equal(sampler(np.random.default_rng(1), 2),
                          np.random.default_rng(1).multinomial(5, rows_of_pvals, size=2))

    class Mine(np.random.Generator):
        pass

    pvals = np.full(5000, 1 / 5000)
    sampler = MultinomialSampler(5000, pvals, fast=True)
    got = sampler(Mine(np.random.PCG64(4)), 3)
    assert np.array_equal(got, np.random.default_rng(4).multinomial(5000, pvals, size=3))
    assert not MultinomialSampler(5000, pvals, expected_draws=1000).fast
    assert MultinomialSampler(5000, pvals, expected_draws=multinomial.FAST_MIN_DRAWS).fast
    saved = dict(multinomial._KERNELS)
    try:
        multinomial._KERNELS.clear()
        multinomial._KERNELS["module"] = None  # numba missing or failing
        plain = MultinomialSampler(5000, pvals, fast=True)
        assert not plain.fast
        assert np.array_equal(plain(np.random.default_rng(4), 3, np.empty((3, 5000))),
                              np.random.default_rng(4).multinomial(5000, pvals, size=3))
    finally:
        multinomial._KERNELS.clear()
        multinomial._KERNELS.update(saved)
    with pytest.raises(ValueError):
        sampler(np.random.default_rng(0), 3, np.empty((3, 4999)))


@njit
def _disagreements(rng, dns, pp, qq, lq, inv, xmin, xmax, toff, table, n_random):  # pragma: no cover - compiled
    """For each dn: U at every place numpy's inversion changes its answer (its running sums of px,
    one ulp either side, 1e-13 either side) and n_random uniform ones; counts the table's answers and
    those differing from numpy's loop."""
    decided = 0
    wrong = 0
    for dn in dns:
        edges = np.empty(6)
        px = math.exp(dn * lq)
        total = px
        for x in range(6):
            edges[x] = total
            px = ((dn - (x + 1) + 1) * pp * px) / ((x + 1) * qq)
            total += px
        for i in range(6 * 5 + n_random):
            if i < 30:
                edge = edges[i // 5]
                kind = i % 5
                U = edge if kind == 0 else (np.nextafter(edge, 0.0) if kind == 1 else (
                    np.nextafter(edge, 1.0) if kind == 2 else (edge - 1e-13 if kind == 3 else edge + 1e-13)))
            else:
                U = rng.random()
            if not (0.0 <= U < 1.0):
                continue
            x = kernels.decide(U, float(dn), inv, xmin, xmax, toff, table)
            if x >= 0:
                decided += 1
                if x != kernels._inversion(rng, U, dn, pp, qq, lq):
                    wrong += 1
    return decided, wrong


def test_the_table_agrees_with_numpys_loop_where_its_answer_changes() -> None:
    """Every range of p the table serves (its ends, log-uniform inside, and 1/N as a uniform draw
    gives them), dn across the range it serves: the table's X is numpy's wherever it answers."""
    multinomial._kernels()
    table, groups = multinomial._KERNELS["table"], multinomial._KERNELS["groups"]
    rng = np.random.default_rng(99)
    ends = (0.0,) + kernels.GROUP_P
    ps = []
    for lo, hi in zip(ends[:-1], ends[1:]):
        low = max(lo, hi / 64)
        ps += [hi, np.nextafter(lo, 1.0) if lo else hi / 1e3, *np.exp(rng.uniform(np.log(low), np.log(hi), 40))]
    ps += [1.0 / n for n in (1025, 1100, 4096, 5000, 20_000, 66_667, 65_536, 70_000, 200_000)]
    decided = wrong = 0
    for p in ps:
        params = kernels.steps(np.array([p, 1.0 - p]), *groups)
        _, pp, qq, lq, inv, xmin, xmax, toff = (a[0] for a in params)
        assert math.isfinite(xmin), p
        lo, hi = math.ceil(xmin), math.floor(xmax)
        dns = np.unique(np.concatenate([rng.integers(lo, hi + 1, 60), [lo, hi],
                                        np.round(np.array([0.5, 1.0, 1.5, 2.0, 3.0]) / p).astype(np.int64)]))
        dns = dns[(dns >= lo) & (dns <= hi)].astype(np.int64)
        d, w = _disagreements(rng, dns, pp, qq, lq, inv, xmin, xmax, toff, table, 40)
        decided += d
        wrong += w
    assert wrong == 0
    assert decided > 50_000  # the table does answer (dn spans lambda 0.25 .. 29, mostly X >= K): not vacuous


def test_table_bounds_are_ordered() -> None:
    table = kernels.table().reshape(len(kernels.GROUP_P), kernels.NC, 8)
    lo, hi = table[:, :, 0:7:2], table[:, :, 1:7:2]
    assert np.all(lo[:, :, :3] <= hi)
    assert np.all(hi[:, :, 1:] >= hi[:, :, :-1])  # X >= k+1 needs a larger lambda than X >= k
    assert np.all(lo[:, 1:] <= lo[:, :-1]) and np.all(hi[:, 1:] <= hi[:, :-1])  # a larger U, a smaller lambda


def _bootstrap_as_before(values: np.ndarray, codes: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """bootstrap_means before the compiled draw: numpy's multinomial a chunk at a time, as float64."""
    n_clusters = int(codes.max()) + 1
    counted = ~np.isnan(values)
    filled = np.where(counted, values, 0.0)
    sums = np.stack([np.bincount(codes, weights=filled[:, j], minlength=n_clusters) for j in range(values.shape[1])], 1)
    counts = np.stack([np.bincount(codes, weights=counted[:, j].astype(np.float64), minlength=n_clusters)
                       for j in range(values.shape[1])], 1)
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, values.shape[1]))
    with stats._one_blas_thread():  # as bootstrap_means: OpenBLAS's threads split these sums
        for start in range(0, n_boot, stats.CHUNK):
            size = min(stats.CHUNK, n_boot - start)
            weights = rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=size).astype(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[start:start + size] = (weights @ sums) / (weights @ counts)
    return out


@pytest.mark.parametrize("clusters, n_boot", [(57, 100), (20_000, 1000), (66_667, 300)])  # numpy, compiled, compiled
def test_bootstrap_replicates_are_the_ones_numpys_draws_give(clusters: int, n_boot: int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(clusters)
    codes = rng.integers(0, clusters, 3 * clusters)
    codes[:clusters] = np.arange(clusters)
    values = rng.random((len(codes), 3))
    values[rng.random(values.shape) < 0.2] = np.nan
    stats._WEIGHTS.clear()
    fast = []

    class Spy(MultinomialSampler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            fast.append(self.fast)

    monkeypatch.setattr(stats, "MultinomialSampler", Spy)
    got = stats.bootstrap_means(values, codes, n_boot=n_boot, seed=5)
    stats._WEIGHTS.clear()
    assert fast == [clusters * n_boot >= multinomial.FAST_MIN_DRAWS]
    assert np.array_equal(got, _bootstrap_as_before(values, codes, n_boot, 5), equal_nan=True)
