"""`random.Random.randint` a million times over, drawn in bulk: the same numbers, in C loops.

The random chance baseline answers every query point with `rng.randint(low, high)` of its group's
range, from a `random.Random(seed)`: those draws are part of the report's numbers and stay as they
are. A Python call per draw cost a VCBench report ~1 s per million query points, so the draws are
made here from the same Mersenne Twister words. CPython's `randint(a, b)` is
`a + _randbelow(b - a + 1)`, and `_randbelow(n)` takes `getrandbits(k)` (k = n.bit_length(): one
32-bit word shifted right by 32 - k, for k <= 32) until the value is below n. numpy's `MT19937`
set to the same state gives the same words (`random_raw`), so each draw is the next accepted word
of its width: for every distinct width, the positions of its accepted words are one array pass,
and only the (few) runs of equal widths are walked in Python. Anything outside that case (a
subclass of Random, a width of 2**32 or more, many distinct widths) is drawn one call at a time.
"""

from __future__ import annotations

import random
from bisect import bisect_left

import numpy as np

MAX_WIDTHS = 64  # distinct range widths drawn in bulk (each costs one pass over the words)


def randint_sequence(rng: random.Random, lows: np.ndarray, highs: np.ndarray) -> np.ndarray:
    """`[rng.randint(low, high) for low, high in zip(lows, highs)]` as int64, leaving `rng` in the
    state that loop leaves it in."""
    lows = np.asarray(lows, dtype=np.int64)
    highs = np.asarray(highs, dtype=np.int64)
    widths = highs - lows + 1
    if (type(rng) is not random.Random or len(lows) == 0 or int(widths.min()) < 1
            or int(widths.max()) >= 2**32 or len(np.unique(widths)) > MAX_WIDTHS):
        return np.array([rng.randint(low, high) for low, high in zip(lows.tolist(), highs.tolist())], dtype=np.int64)
    version, internal, gauss_next = rng.getstate()
    bits = np.frexp(widths.astype(np.float64))[1]  # n.bit_length(), exact below 2**53
    expected = float(np.sum(np.ldexp(1.0, bits) / widths))  # words per draw: 2**k / n on average
    budget = int(expected * 1.1) + 1024
    while True:
        drawn = _draw(internal, widths, budget)
        if drawn is not None:
            values, used = drawn
            break
        budget *= 2
    rng.setstate((version, _state_after(internal, used), gauss_next))
    return lows + values


def _generator(internal: tuple[int, ...]) -> np.random.MT19937:
    generator = np.random.MT19937()
    generator.state = {"bit_generator": "MT19937",
                       "state": {"key": np.array(internal[:624], dtype=np.uint32), "pos": internal[624]}}
    return generator


def _state_after(internal: tuple[int, ...], used: int) -> tuple[int, ...]:
    """Python's internal state after `used` more 32-bit words."""
    generator = _generator(internal)
    generator.random_raw(used)
    state = generator.state["state"]
    return tuple(int(word) for word in state["key"]) + (int(state["pos"]),)


def _draw(internal: tuple[int, ...], widths: np.ndarray, budget: int) -> tuple[np.ndarray, int] | None:
    """(the draws below each width, words used) from the next `budget` words, or None if too few."""
    words = _generator(internal).random_raw(budget)
    n = len(widths)
    run_starts = np.flatnonzero(np.concatenate(([True], widths[1:] != widths[:-1])))
    run_lengths = np.diff(np.append(run_starts, n))
    run_widths = widths[run_starts]
    accepted: dict[int, np.ndarray] = {}  # width -> positions of the words a draw of it accepts
    for width in np.unique(run_widths).tolist():
        shift = 32 - int(width).bit_length()
        accepted[width] = np.flatnonzero((words >> np.uint64(shift)) < np.uint64(width))
    # walk the runs: a run of m draws of width w starting at word p takes the next m accepted words
    first_taken = np.empty(len(run_starts), dtype=np.int64)
    position = 0
    as_lists = {width: positions.tolist() for width, positions in accepted.items()} if len(run_starts) > 1 else {}
    for run, (width, length) in enumerate(zip(run_widths.tolist(), run_lengths.tolist())):
        if run == 0:
            rank = 0  # the first run starts at the first word
        else:
            rank = bisect_left(as_lists[width], position)
        if rank + length > len(accepted[width]):
            return None
        first_taken[run] = rank
        position = int(accepted[width][rank + length - 1]) + 1
    values = np.empty(n, dtype=np.int64)
    run_of = np.repeat(np.arange(len(run_starts)), run_lengths)
    rank_of = first_taken[run_of] + (np.arange(n) - run_starts[run_of])
    for width, positions in accepted.items():
        chosen = widths == width
        values[chosen] = (words[positions[rank_of[chosen]]] >> np.uint64(32 - int(width).bit_length())).astype(np.int64)
    return values, position
