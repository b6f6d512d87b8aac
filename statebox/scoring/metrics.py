"""The benchmark metrics as pure functions over parsed predictions and targets.

Scalar versions are the readable definitions (and what per-attempt scoring uses);
the `*_array` versions compute the same numbers for many queries at once with
numpy, so scoring a million predictions is never the slow part of a run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# VSTAT: the released code builds its thresholds as numpy.linspace(0.5, 0.95, int(10.999...)) and
# compares `relative error <= 1 - t` in float64; boundary cases (p=9, g=10 -> 9 of 10) depend on it.
MRA_THRESHOLDS = np.linspace(0.5, 0.95, int((0.95 - 0.5) / 0.05 + 2))
MRA_LIMITS = 1.0 - MRA_THRESHOLDS
MSTA_ALPHAS = (0.01, 0.1, 0.2, 0.3)


# ---------------------------------------------------------------- VSTAT

def mra(prediction: int | None, target: int) -> float:
    """Mean Relative Accuracy: the fraction of the 10 thresholds t with |p-g|/|g| <= 1-t (g=0: exact only)."""
    if prediction is None:
        return 0.0
    if target == 0:
        return 1.0 if prediction == 0 else 0.0
    error = abs(prediction - target) / abs(target)
    return float(np.count_nonzero(error <= MRA_LIMITS)) / len(MRA_LIMITS)


# ---------------------------------------------------------------- VCBench

def gpa_point(prediction: float, target: float) -> float:
    sigma = 0.05 * max(target, 1)
    return math.exp(-((prediction - target) ** 2) / (2 * sigma**2))


def gpa(predictions: Sequence[float], targets: Sequence[float]) -> float | None:
    """Gaussian Precision Accuracy of one question: the mean of exp(-(p-g)^2 / (2 (0.05 max(g,1))^2))."""
    if not predictions:
        return None
    return sum(gpa_point(p, g) for p, g in zip(predictions, targets)) / len(predictions)


def moc(predictions: Sequence[float]) -> float | None:
    """Monotonicity Consistency: i/(n-1) at the first 0-based i with p[i+1] < p[i], else 1 (n >= 2)."""
    n = len(predictions)
    if n < 2:
        return None
    for i in range(n - 1):
        if predictions[i + 1] < predictions[i]:
            return i / (n - 1)
    return 1.0


def _sign(x: float) -> int:
    return 1 if x > 0 else (-1 if x < 0 else 0)


def uda(predictions: Sequence[float], targets: Sequence[float]) -> float | None:
    """Update Direction Accuracy: the share of steps where sign(p[i+1]-p[i]) == sign(g[i+1]-g[i]) (n >= 2)."""
    n = len(predictions)
    if n < 2:
        return None
    hits = sum(
        _sign(predictions[i + 1] - predictions[i]) == _sign(targets[i + 1] - targets[i]) for i in range(n - 1)
    )
    return hits / (n - 1)


def gpa_array(predictions: np.ndarray, targets: np.ndarray) -> np.ndarray:
    sigma = 0.05 * np.maximum(targets, 1)
    return np.exp(-((predictions - targets) ** 2) / (2 * sigma**2))


# ---------------------------------------------------------------- EOC-Bench

def msta(prediction: float, target: float) -> float:
    """Multi-Scale Temporal Accuracy: the mean over alpha in {0.01,0.1,0.2,0.3} of 1[|p-g| <= alpha g]."""
    return sum(abs(target - prediction) <= a * target for a in MSTA_ALPHAS) / len(MSTA_ALPHAS)


def msta_hits(prediction: float, target: float) -> list[bool]:
    return [abs(target - prediction) <= a * target for a in MSTA_ALPHAS]


# ---------------------------------------------------------------- EC-Bench enumeration

def precision_recall_f1(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    """As the released judge: zero denominators give 0.0."""
    precision = tp / (tp + fp) if tp + fp > 0 else 0.0
    recall = tp / (tp + fn) if tp + fn > 0 else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return precision, recall, f1
