"""Uncertainty: 95% bootstrap confidence intervals clustered by video.

Questions about the same video are not independent (one misread video sinks
several answers), so the bootstrap resamples whole videos with replacement.
Resampling C clusters with replacement is a multinomial draw of per-cluster
multiplicities, which turns every bootstrap replicate into one matrix product.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
# numpy 2 imports numpy.random on first use: first used inside a report, its burst of new objects
# set off a full collection of the cyclic collector over the report's million predictions (~2 s)
import numpy.random  # noqa: F401

from statebox.scoring.multinomial import MultinomialSampler

CHUNK = 32  # replicates per matrix product: CHUNK x clusters stays in cache between the draw and the product (200: ~20% slower)
# The resampling weights depend on (clusters, n_boot, seed) only, not on the values: every agent
# scored on the same videos draws the same ones, so they are drawn once and kept (as the float64
# the product takes; the draw is most of a bootstrap's cost). Kept while they fit
# WEIGHT_CACHE_ENTRIES (8 bytes each) in all.
WEIGHT_CACHE_ENTRIES = 8_000_000
_WEIGHTS: dict[tuple[int, int, int], np.ndarray] = {}


_SET_THREADS_LOCAL: object = None  # OpenBLAS's openblas_set_num_threads_local, once looked up


def _blas_thread_setter() -> object:
    """numpy's OpenBLAS `openblas_set_num_threads_local` (returns the previous count), or False."""
    global _SET_THREADS_LOCAL
    if _SET_THREADS_LOCAL is None:
        _SET_THREADS_LOCAL = False
        try:
            with open("/proc/self/maps") as fh:
                paths = {line.split()[-1] for line in fh if "openblas" in line.lower() and "/" in line}
            for path in sorted(paths):
                function = getattr(ctypes.CDLL(path), "openblas_set_num_threads_local", None)
                if function is not None:
                    function.argtypes, function.restype = [ctypes.c_int], ctypes.c_int
                    _SET_THREADS_LOCAL = function
                    break
        except (OSError, AttributeError):
            pass
    return _SET_THREADS_LOCAL


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """The bootstrap's products are small (CHUNK x clusters by clusters x metrics): OpenBLAS's
    extra threads gain nothing there and, on a busy machine, burn CPU spinning (a third of a 100k
    report's CPU). One thread also keeps the numbers the same on every machine: for a 32 x 66,667
    by 66,667 x 3 product OpenBLAS's threads split the sums too (18 of its 96 results differed, by up to 7e-12)."""
    setter = _blas_thread_setter()
    if not setter:
        yield
        return
    previous = setter(1)  # type: ignore[operator]
    try:
        yield
    finally:
        setter(previous)  # type: ignore[operator]


def cluster_codes(clusters: Sequence[object]) -> np.ndarray:
    """Each cluster's rank among the distinct cluster names (sorted by code point, as numpy sorts).

    Ranked through a dictionary of the distinct names, not numpy's sort of every name: a numpy
    string array drops trailing NUL characters, so names holding one take numpy's way."""
    names = [str(c) for c in clusters]
    if "\x00" in "".join(names):
        _, codes = np.unique(np.asarray(names), return_inverse=True)
        return codes.astype(np.int64)
    rank = {name: code for code, name in enumerate(sorted(set(names)))}
    return np.fromiter(map(rank.__getitem__, names), dtype=np.int64, count=len(names))


def bootstrap_means(values: np.ndarray, codes: np.ndarray, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """Replicates of the column means of `values` (n x m, NaN = not counted), resampling clusters.

    Returns an (n_boot x m) array; a replicate whose resample holds no counted value is NaN.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    n_clusters = int(codes.max()) + 1 if len(codes) else 0
    counted = ~np.isnan(values)
    # per-cluster sums and counts (bincount adds in input order, as np.add.at did, at C speed)
    filled = np.where(counted, values, 0.0)
    sums = np.zeros((n_clusters, values.shape[1]))
    counts = np.zeros((n_clusters, values.shape[1]))
    for j in range(values.shape[1]):
        sums[:, j] = np.bincount(codes, weights=filled[:, j], minlength=n_clusters)
        counts[:, j] = np.bincount(codes, weights=counted[:, j].astype(np.float64), minlength=n_clusters)
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, values.shape[1]))
    if n_clusters == 0:
        out.fill(np.nan)
        return out
    cached = _WEIGHTS.get((n_clusters, n_boot, seed))
    keep = cached is None and n_boot * n_clusters <= WEIGHT_CACHE_ENTRIES and n_clusters < 2**31
    drawn: list[np.ndarray] | None = [] if keep else None
    probabilities = np.full(n_clusters, 1.0 / n_clusters)
    with _one_blas_thread():
        _products(out, sums, counts, rng, cached, drawn, n_boot, n_clusters, probabilities)
    if drawn is not None:
        while _WEIGHTS and sum(w.size for w in _WEIGHTS.values()) + n_boot * n_clusters > WEIGHT_CACHE_ENTRIES:
            _WEIGHTS.pop(next(iter(_WEIGHTS)))
        _WEIGHTS[(n_clusters, n_boot, seed)] = np.concatenate(drawn)
    return out


def _products(out: np.ndarray, sums: np.ndarray, counts: np.ndarray, rng: np.random.Generator,
              cached: np.ndarray | None, drawn: list[np.ndarray] | None, n_boot: int, n_clusters: int,
              probabilities: np.ndarray) -> None:
    # rng.multinomial's very counts, drawn compiled when the draw is big (multinomial.py), written as
    # the float64 the product takes into one buffer reused chunk after chunk unless they are kept
    sampler = MultinomialSampler(n_clusters, probabilities, n_boot * n_clusters) if cached is None else None
    buffer = np.empty((min(CHUNK, n_boot), n_clusters)) if sampler is not None and drawn is None else None
    for start in range(0, n_boot, CHUNK):
        size = min(CHUNK, n_boot - start)
        if sampler is None:
            assert cached is not None
            weights = cached[start : start + size]
        else:
            weights = sampler(rng, size, buffer[:size] if buffer is not None else np.empty((size, n_clusters)))
            if drawn is not None:
                drawn.append(weights)
        numerator = weights @ sums
        denominator = weights @ counts
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start : start + size] = numerator / denominator


def percentile_interval(replicates: np.ndarray, level: float = 0.95) -> tuple[float, float] | None:
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0:
        return None
    tail = (1.0 - level) / 2 * 100
    lo, hi = np.percentile(finite, [tail, 100 - tail])
    return float(lo), float(hi)


def bootstrap_ci(values: Sequence[float | None], clusters: Sequence[object], n_boot: int = 1000,
                 seed: int = 0, level: float = 0.95) -> tuple[float, float] | None:
    """95% percentile CI of the mean of `values` (None = not counted), resampling `clusters` (videos)."""
    array = np.asarray([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    if len(array) != len(clusters):
        raise ValueError("values and clusters must have the same length")
    if not np.isfinite(array).any():
        return None
    replicates = bootstrap_means(array, cluster_codes(clusters), n_boot=n_boot, seed=seed)[:, 0]
    return percentile_interval(replicates, level)
