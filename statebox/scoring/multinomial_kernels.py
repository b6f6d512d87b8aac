"""The compiled half of `multinomial.py`: numpy's `random_multinomial` in numba, and its fast path.

Imported only through `multinomial.py` (which falls back to numpy's own call when numba is
missing). Every function here reproduces numpy 2.x's C code (numpy/random/src/distributions/
distributions.c: `random_multinomial`, `random_binomial`, `random_binomial_inversion`,
`random_binomial_btpe`) operation for operation, in the same order and with the same libm
functions (glibc's exp, log, log1p, sqrt, floor), on the Generator's own bit generator: the counts
are the same integers and the generator is left where numpy leaves it.

The fast path (`fill`) decides most binomials without exp: for a step of the multinomial (cluster
j, binomial probability p_j, dn trials left) numpy's inversion returns X >= k exactly when
U > F(k - 1), the binomial CDF, evaluated as qn = exp(dn * log1p(-p)) and a product recurrence.
In lambda = -dn * log1p(-p) that CDF is exp(-lambda) * sum_{l<k} prod_{m<l} (lambda/mu - m*r) / l!
(r = p/q, mu = -log1p(-p)/r), which lies between two one-parameter functions of lambda once p is
known to lie in a small range (`GROUP_P`). So a table built once per process, per range of p and
per 1/NC slice of U, bounds the lambda where X >= k starts; a step with dn clearly on one side of
every bound takes X from two comparisons per k, with no data dependency longer than a compare
(numpy's loop waits on exp and a division, and mispredicts its exit about once a binomial). A step
inside a bound's margin, with X possibly >= K, outside the table's p ranges, or near BTPE's region
goes through numpy's exact code with the U already drawn. The margins cover every rounding of
numpy's arithmetic (FUZZ, far above the ~1e-14 it needs), so both paths give numpy's X.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

NC = 1024  # slices of U per table
K = 4  # X decided by the table when certainly < K; K slots of (lambda_lo, lambda_hi) per slice, padded to 8
GROUP_P = (2.0**-16, 2.0**-14, 2.0**-12, 2.0**-10)  # upper ends of the ranges of p with a table (the first from 0)
LAMBDA_MIN = 0.25  # the table serves lambda >= this (the bounds below hold there; dn is ~1/p, lambda ~1)
LAMBDA_MAX = 40.0  # search range end (inversion serves p * dn <= 30, lambda <= ~30)
FUZZ = 1e-11  # margin on U for numpy's rounding (its qn and recurrence are within ~1e-14 of the CDF)
INT64_MIN = -(2**63)
# The compiled functions carry no annotations (numba types them from the call; mypy leaves their
# bodies alone). Every one is cache=True (compiled once per machine, into numba's cache) and
# error_model="numpy": C's float semantics, x / 0 is inf or nan and not an exception, as when
# numpy's C divides by a remaining probability of 0 where a row has already ended.


@njit(cache=True, error_model="numpy")
def _c_int64(x):
    """C's (int64_t)x as x86-64 computes it: truncation, INT64_MIN when out of range or NaN."""
    if -9.223372036854775808e18 <= x < 9.223372036854775808e18:
        return np.int64(x)
    return np.int64(INT64_MIN)


@njit(cache=True, error_model="numpy")
def _inversion(rng, U, n, p, q, log_q):
    """random_binomial_inversion(n, p) with its first double U already drawn (q = 1 - p, log_q = log1p(-p))."""
    qn = math.exp(n * log_q)
    np_ = n * p
    bound_f = np_ + 10.0 * math.sqrt(np_ * q + 1)
    bound = _c_int64(float(n) if float(n) < bound_f else bound_f)  # (int64)MIN(n, ...)
    X = 0
    px = qn
    while U > px:
        X += 1
        if X > bound:
            X = 0
            px = qn
            U = rng.random()
        else:
            U -= px
            px = ((n - X + 1) * p * px) / (X * q)
    return X


@njit(cache=True, error_model="numpy")
def _btpe(rng, U, n, p):
    """random_binomial_btpe(n, p) with its first double U already drawn (the `goto`s as a state loop)."""
    r = p if p < 1.0 - p else 1.0 - p
    q = 1.0 - r
    fm = n * r + r
    m = _c_int64(math.floor(fm))
    p1 = math.floor(2.195 * math.sqrt(n * r * q) - 4.6 * q) + 0.5
    xm = m + 0.5
    xl = xm - p1
    xr = xm + p1
    c = 0.134 + 20.5 / (15.3 + m)
    a = (fm - xl) / (fm - xl * r)
    laml = a * (1.0 + a / 2.0)
    a = (xr - fm) / (xr * q)
    lamr = a * (1.0 + a / 2.0)
    p2 = p1 * (1.0 + 2.0 * c)
    p3 = p2 + c / laml
    p4 = p3 + c / lamr
    first = True
    y = np.int64(0)
    while True:  # Step10
        nrq = n * r * q
        if first:
            u = U * p4
            first = False
        else:
            u = rng.random() * p4
        v = rng.random()
        if u <= p1:
            y = _c_int64(math.floor(xm - p1 * v + u))
            break  # Step60
        if u <= p2:  # Step20
            x = xl + (u - p1) / c
            v = v * c + 1.0 - math.fabs(m - x + 0.5) / p1
            if v > 1.0:
                continue
            y = _c_int64(math.floor(x))
        elif u <= p3:  # Step30
            if v == 0.0:
                continue
            y = _c_int64(math.floor(xl + math.log(v) / laml))
            if y < 0:
                continue
            v = v * (u - p2) * laml
        else:  # Step40
            if v == 0.0:
                continue
            y = _c_int64(math.floor(xr - math.log(v) / lamr))
            if y > n:
                continue
            v = v * (u - p3) * lamr
        # Step50
        k = abs(y - m)
        if not ((k > 20) and (k < ((nrq) / 2.0 - 1))):
            s = r / q
            a = s * (n + 1)
            F = 1.0
            if m < y:
                for i in range(m + 1, y + 1):
                    F *= (a / i - s)
            elif m > y:
                for i in range(y + 1, m + 1):
                    F /= (a / i - s)
            if v > F:
                continue
            break  # Step60
        # Step52
        rho = (k / (nrq)) * ((k * (k / 3.0 + 0.625) + 0.16666666666666666) / nrq + 0.5)
        t = -k * k / (2 * nrq)
        A = math.log(v)
        if A < (t - rho):
            break
        if A > (t + rho):
            continue
        x1 = float(y) + 1
        f1 = float(m) + 1
        z = float(n) + 1 - float(m)
        w = float(n) - float(y) + 1
        x2 = x1 * x1
        f2 = f1 * f1
        z2 = z * z
        w2 = w * w
        if A > (xm * math.log(f1 / x1) + (n - m + 0.5) * math.log(z / w)
                + (y - m) * math.log(w * r / (x1 * q))
                + (13680. - (462. - (132. - (99. - 140. / f2) / f2) / f2) / f2) / f1 / 166320.
                + (13680. - (462. - (132. - (99. - 140. / z2) / z2) / z2) / z2) / z / 166320.
                + (13680. - (462. - (132. - (99. - 140. / x2) / x2) / x2) / x2) / x1 / 166320.
                + (13680. - (462. - (132. - (99. - 140. / w2) / w2) / w2) / w2) / w / 166320.):
            continue
        break
    if p > 0.5:
        y = n - y
    return y


@njit(cache=True, error_model="numpy")
def _binomial(rng, U, n, p, pp, qq, log_qq):
    """random_binomial(p, n) for n > 0 and p != 0, its first double U already drawn.
    pp = p if p <= 0.5 else 1 - p; qq = 1 - pp; log_qq = log1p(-pp)."""
    if pp * n <= 30.0:
        x = _inversion(rng, U, n, pp, qq, log_qq)
    else:
        x = _btpe(rng, U, n, pp)
    return n - x if p > 0.5 else x


@njit(cache=True, error_model="numpy")
def steps(pvals, group_p, group_mu_lo, group_mu_hi, group_r_hi):
    """Per step j < d - 1 of random_multinomial: its binomial probability p_j = pvals[j] / remaining
    (remaining -= pvals[j] after each step, as numpy does), pp, qq, log1p(-pp), and for the fast path
    1/-log1p(-pp), the dn range it serves (XMIN > XMAX where it serves none) and its table."""
    d = pvals.shape[0]
    m = max(d - 1, 0)
    P = np.empty(m)
    PP = np.empty(m)
    QQ = np.empty(m)
    LQ = np.empty(m)
    INV = np.zeros(m)
    XMIN = np.full(m, np.inf)
    XMAX = np.zeros(m)
    TOFF = np.zeros(m, dtype=np.int64)
    remaining = 1.0
    for j in range(m):
        p = pvals[j] / remaining
        P[j] = p
        pp = p if p <= 0.5 else 1.0 - p
        PP[j] = pp
        QQ[j] = 1.0 - pp
        LQ[j] = math.log1p(-pp)
        remaining -= pvals[j]
        if not (0.0 < p <= group_p[-1]) or not LQ[j] < 0.0:
            continue
        g = 0
        while p > group_p[g]:
            g += 1
        mu = -LQ[j] * QQ[j] / pp  # what numpy's recurrence uses, within 4 ulp; the bounds are 1e-12 wider
        r = pp / QQ[j]
        if not (group_mu_lo[g] * (1 + 1e-13) <= mu <= group_mu_hi[g] * (1 - 1e-13)
                and r <= group_r_hi[g] * (1 - 1e-13)):
            continue
        INV[j] = 1.0 / -LQ[j]
        XMIN[j] = LAMBDA_MIN * INV[j] * (1 + 1e-12)  # lambda = dn * -log1p(-p) >= LAMBDA_MIN
        XMAX[j] = 29.0 / pp * (1 - 1e-12)  # pp * dn < 30: inversion, not BTPE
        TOFF[j] = g * NC * 8
    return P, PP, QQ, LQ, INV, XMIN, XMAX, TOFF


@njit(cache=True, error_model="numpy", inline="always")
def decide(U, dnf, inv, xmin, xmax, toff, T):
    """numpy's X for a step from the table (see the module docstring), or -1 where it does not decide.
    X >= k is certain where dn > lambda_hi(k) / -log1p(-p) and ruled out where dn < lambda_lo(k) / ...;
    decided when every k = 1..K is one or the other, none of the K is certain, and dn is in the range
    the table serves (xmin..xmax)."""
    b = toff + (np.int64(U * NC) << 3)
    yes = (dnf > T[b + 1] * inv) + (dnf > T[b + 3] * inv) + (dnf > T[b + 5] * inv)
    maybe = (dnf >= T[b] * inv) + (dnf >= T[b + 2] * inv) + (dnf >= T[b + 4] * inv) + (dnf >= T[b + 6] * inv)
    if yes == maybe and dnf >= xmin and dnf <= xmax:
        return np.int64(yes)
    return np.int64(-1)


@njit(cache=True, error_model="numpy")
def fill(rng, n, P, PP, QQ, LQ, INV, XMIN, XMAX, TOFF, T, out):
    """random_multinomial(n, pvals) into each row of `out` (rows x d, int64 or float64; every entry
    written), in order, from `rng`; numpy's own code for each binomial the table does not decide."""
    rows, d = out.shape
    for row in range(rows):
        dn = n
        for j in range(d - 1):
            pj = P[j]
            if dn <= 0 or pj == 0.0:  # numpy: broken out of the loop, or p == 0 (no draw)
                out[row, j] = 0
                continue
            U = rng.random()
            x = decide(U, float(dn), INV[j], XMIN[j], XMAX[j], TOFF[j], T)
            if x < 0:
                x = _binomial(rng, U, dn, pj, PP[j], QQ[j], LQ[j])
            out[row, j] = x
            dn -= x
        out[row, d - 1] = dn if dn > 0 else 0


@njit(cache=True, error_model="numpy")
def fill_exact(rng, n, P, PP, QQ, LQ, out):
    """`fill` without the table: every binomial through numpy's code (the reference the tests hold `fill` to)."""
    rows, d = out.shape
    for row in range(rows):
        dn = n
        for j in range(d - 1):
            pj = P[j]
            if dn <= 0 or pj == 0.0:
                out[row, j] = 0
                continue
            U = rng.random()
            x = _binomial(rng, U, dn, pj, PP[j], QQ[j], LQ[j])
            out[row, j] = x
            dn -= x
        out[row, d - 1] = dn if dn > 0 else 0


def _poisson_head(rate: float, k: int, lam: np.ndarray) -> np.ndarray:
    """exp(-lam) * sum_{l<k} (rate * lam)**l / l!"""
    term = np.ones_like(lam)
    total = np.ones_like(lam)
    for l in range(1, k):
        term = term * (rate * lam) / l
        total = total + term
    return np.exp(-lam) * total


def _decreasing_from_lambda_min(rate: float, k: int) -> bool:
    """exp(-lam) * P(lam), P = sum_{l<k} (rate*lam)^l/l!, has derivative exp(-lam) * ((rate - 1) P - rate T)
    with T its last term; T/P grows with lam, so it decreases on [LAMBDA_MIN, inf) if it does at LAMBDA_MIN."""
    if rate <= 1.0 or k == 1:
        return True
    x = rate * LAMBDA_MIN
    terms = [x**l / math.factorial(l) for l in range(k)]
    return terms[-1] / sum(terms) > (rate - 1.0) / rate * (1 + 1e-6)


def _last_at_least(rate: float, k: int, target: np.ndarray) -> np.ndarray:
    """Per target t: a lambda above which exp(-lam) P(lam) < t on [LAMBDA_MIN, inf) (inf where none)."""
    lo = np.full(target.shape, LAMBDA_MIN)
    hi = np.full(target.shape, LAMBDA_MAX)
    for _ in range(64):
        mid = (lo + hi) / 2
        above = _poisson_head(rate, k, mid) >= target
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    out = hi * (1 + 1e-9)
    out[_poisson_head(rate, k, np.full(target.shape, LAMBDA_MIN)) < target] = LAMBDA_MIN * (1 + 1e-9)
    out[_poisson_head(rate, k, np.full(target.shape, LAMBDA_MAX)) >= target] = np.inf
    return out


def _first_at_most(rate: float, k: int, target: np.ndarray) -> np.ndarray:
    """Per target t: a lambda below which exp(-lam) P(lam) > t on [LAMBDA_MIN, inf) (0 where none)."""
    lo = np.full(target.shape, LAMBDA_MIN)
    hi = np.full(target.shape, LAMBDA_MAX)
    for _ in range(64):
        mid = (lo + hi) / 2
        above = _poisson_head(rate, k, mid) > target
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    out = lo * (1 - 1e-9)
    out[_poisson_head(rate, k, np.full(target.shape, LAMBDA_MIN)) <= target] = 0.0
    out[_poisson_head(rate, k, np.full(target.shape, LAMBDA_MAX)) > target] = LAMBDA_MAX * (1 - 1e-9)
    return out


def _mu(p: float) -> float:
    return 1.0 if p == 0.0 else -math.log1p(-p) * (1.0 - p) / p


def group_bounds() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per range of p (p_lo, p_hi]: p_hi, and bounds on mu and r over it, 1e-12 wider
    (mu decreases with p, r = p/(1-p) grows)."""
    p_hi = np.array(GROUP_P)
    p_lo = np.array((0.0,) + GROUP_P[:-1])
    mu_lo = np.array([_mu(p) * (1 - 1e-12) for p in p_hi])
    mu_hi = np.array([_mu(p) * (1 + 1e-12) for p in p_lo])
    r_hi = p_hi / (1.0 - p_hi) * (1 + 1e-12)
    return p_hi, mu_lo, mu_hi, r_hi


def table() -> np.ndarray:
    """Per range of p, per slice [c/NC, (c+1)/NC) of U, per k = 1..K: (lambda_lo, lambda_hi) such that for
    every step in the range with lambda = dn * -log1p(-p) >= LAMBDA_MIN, numpy's X < k when lambda < lambda_lo
    and X >= k when lambda > lambda_hi. With a = 1/mu_lo and b_k = 1/mu_hi - (k-2) r_hi / LAMBDA_MIN, each
    factor lambda/mu - m r (m <= k-2, all >= 0 as dn >= k) lies in [b_k lambda, a lambda], so numpy's CDF
    lies between exp(-lam) sum (b_k lam)^l/l! and exp(-lam) sum (a lam)^l/l!, both decreasing there."""
    _, mu_lo, mu_hi, r_hi = group_bounds()
    cells = np.arange(NC, dtype=np.float64)
    u0, u1 = cells / NC, (cells + 1) / NC
    out = np.zeros((len(GROUP_P), NC, 8))
    for g in range(len(GROUP_P)):
        a = 1.0 / mu_lo[g] * (1 + 1e-12)
        for k in range(1, K + 1):
            b = (1.0 / mu_hi[g] - (k - 2) * r_hi[g] / LAMBDA_MIN) * (1 - 1e-12) if k >= 2 else 1.0
            if not (_decreasing_from_lambda_min(a, k) and _decreasing_from_lambda_min(b, k)):
                raise ArithmeticError("multinomial table: a bound is not decreasing from LAMBDA_MIN")
            out[g, :, 2 * (k - 1)] = _first_at_most(b, k, u1 + 2 * FUZZ)
            if k < K:
                out[g, :, 2 * (k - 1) + 1] = _last_at_least(a, k, u0 - 2 * FUZZ)
    return out.ravel()
