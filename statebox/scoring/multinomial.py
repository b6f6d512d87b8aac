"""`Generator.multinomial(n, pvals, size=rows)`, the same integers, about 4x faster on large draws.

The clustered bootstrap (`stats.py`) resamples C clusters with replacement 1000 times: numpy's
multinomial draw, C - 1 binomials per replicate, was ~2.6 s CPU of a 1M-prediction report (66,667
clusters). Those draws make the CIs, so they must stay the very same numbers. numpy's C loop spends
its time waiting: each binomial's exp(dn * log1p(-p)), then a division per step of the inversion,
and a mispredicted loop exit about once a binomial, with the next binomial's trial count depending
on this one's result. `multinomial_kernels.py` runs numpy's own algorithm (inversion and BTPE, the
same operations in the same order, glibc's exp/log1p, the Generator's own bit generator, so the
stream is left where numpy leaves it), with a fast path that decides most binomials from a
precomputed table of rigorous bounds and hands every undecided one to numpy's exact code.

Compiled by numba (`cache=True`: ~2 s once per machine, done by `make setup` through `warm`, then
loaded from the cache) rather than as our own C extension: statebox is pure Python, installed from
pyproject with no compiler or per-platform build, and numba's wheels come from PyPI like numpy's;
its price is ~0.55 s CPU to import and load once per process, so it is imported only when a draw is
big enough to pay for it (`FAST_MIN_DRAWS`). Where numba is missing or fails, numpy's own call is
used: the same numbers, slower.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import numpy as np

from statebox.collector import collector_paused

# binomials (rows x categories) a sampler is asked for, at least, to use numba: numpy takes ~38 ns a
# binomial, the compiled draw ~9, and numba's import and first call cost ~0.55 s CPU once per process
# (from its cache; ~2 s the first time on a machine, see `warm`), so a first draw pays from ~20 M
# binomials, and once numba is loaded from FAST_MIN_DRAWS_LOADED (a sampler's own setup is ~30 ns a category)
FAST_MIN_DRAWS = 20_000_000
FAST_MIN_DRAWS_LOADED = 200_000
_KERNELS: dict[str, Any] = {}  # "module": multinomial_kernels, or None when numba is unusable; "table"; "groups"


def _kernels() -> ModuleType | None:
    """multinomial_kernels, compiled (or loaded from numba's cache) and with its table, or None."""
    if "module" not in _KERNELS:
        # numba's import and first call leave ~130,000 new objects (and make many more): with the
        # cyclic collector on, its collections re-scan a report's million predictions (the import
        # took 2.8 s instead of 0.2 s inside a 1M-prediction report)
        with collector_paused():
            _load_kernels()
    module: ModuleType | None = _KERNELS["module"]
    return module


def _load_kernels() -> None:
    try:
        from statebox.scoring import multinomial_kernels as kernels

        groups = kernels.group_bounds()
        table = kernels.table()
        # compile (or load) the bootstrap's signature now, before any real draw
        p, pp, qq, lq, inv, xmin, xmax, toff = kernels.steps(np.full(3, 1.0 / 3), *groups)
        kernels.fill(np.random.default_rng(0), np.int64(3), p, pp, qq, lq, inv, xmin, xmax, toff, table,
                     np.zeros((1, 3), dtype=np.float64))
    except Exception:  # noqa: BLE001 - numba missing or unable to compile here: numpy's call
        _KERNELS["module"] = None
    else:
        _KERNELS.update(module=kernels, table=table, groups=groups)


def warm() -> bool:
    """Compile the draws into numba's cache (`make setup` does, so that no `statebox score` pays the
    ~2 s): the signatures the bootstrap and the tests use. False when numba is missing or fails."""
    kernels = _kernels()
    if kernels is None:
        return False
    pvals = np.full(3, 1.0 / 3)
    for exact in (False, True):
        MultinomialSampler(3, pvals, fast=True, exact=exact)(np.random.default_rng(0), 1)
    return True


class MultinomialSampler:
    """`rng.multinomial(n, pvals, size=rows)` for one (n, pvals), called any number of times.

    Uses the compiled draw when `expected_draws` (rows x categories over all calls) is at least
    FAST_MIN_DRAWS (FAST_MIN_DRAWS_LOADED once numba is loaded, or `fast=True`), numba works, `rng`
    is a plain numpy Generator and (n, pvals) are ones numpy takes as they are; otherwise numpy's own
    call. Both give the same integers and leave the generator in the same state (the compiled draw
    does not take the Generator's lock: one thread draws from it at a time, as in `stats`).
    `exact=True` (tests) draws every binomial through numpy's code, without the fast path's table."""

    def __init__(self, n: int, pvals: np.ndarray, expected_draws: int = 0, *, fast: bool | None = None,
                 exact: bool = False) -> None:
        self.n = int(n)
        self.pvals = np.ascontiguousarray(pvals, dtype=np.float64)
        self.exact = exact
        if fast is None:
            loaded = _KERNELS.get("module") is not None
            fast = expected_draws >= (FAST_MIN_DRAWS_LOADED if loaded else FAST_MIN_DRAWS)
        self._params: tuple[np.ndarray, ...] | None = None
        self._kernels: ModuleType | None = None
        if fast and self._valid() and (kernels := _kernels()) is not None:
            self._kernels = kernels
            self._params = kernels.steps(self.pvals, *_KERNELS["groups"])

    @property
    def fast(self) -> bool:
        return self._params is not None

    def _valid(self) -> bool:
        """(n, pvals) numpy takes as they are: n >= 0, pvals 1-D, each in [0, 1], sum(pvals[:-1]) <= 1
        (numpy refuses > 1 + 1e-12 by a Kahan sum; fsum <= 1 is within that whatever the rounding)."""
        p = self.pvals
        return (0 <= self.n < 2**62 and p.ndim == 1 and p.size >= 1 and bool(np.all((p >= 0.0) & (p <= 1.0)))
                and math.fsum(p[:-1].tolist()) <= 1.0)

    def __call__(self, rng: np.random.Generator, rows: int, out: np.ndarray | None = None) -> np.ndarray:
        """The counts, rows x categories: int64, or written into `out` (that shape, int64 or float64)."""
        shape = (int(rows), self.pvals.size)
        if out is not None and (out.shape != shape or out.dtype not in (np.int64, np.float64)
                                or not out.flags.c_contiguous or not out.flags.writeable):
            raise ValueError(f"out must be a writeable C-contiguous int64 or float64 array of shape {shape}")
        if self._params is None or type(rng) is not np.random.Generator or rows < 0:
            counts = rng.multinomial(self.n, self.pvals, size=rows)
            if out is None:
                return counts
            out[...] = counts
            return out
        if out is None:
            out = np.empty(shape, dtype=np.int64)
        kernels = self._kernels
        assert kernels is not None
        if self.exact:
            kernels.fill_exact(rng, np.int64(self.n), *self._params[:4], out)
        else:
            kernels.fill(rng, np.int64(self.n), *self._params, _KERNELS["table"], out)
        return out


def multinomial(rng: np.random.Generator, n: int, pvals: np.ndarray, rows: int, *,
                fast: bool | None = None) -> np.ndarray:
    """`rng.multinomial(n, pvals, size=rows)`: one draw, compiled when it is big enough (or `fast`)."""
    return MultinomialSampler(n, pvals, rows * np.size(pvals), fast=fast)(rng, rows)
