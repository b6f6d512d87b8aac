"""Where each query point of a dataset sits in the flat, query-ordered arrays that vectorised rules score.

Item by item, query by query: item k's points are positions `starts[k] .. starts[k] + counts[k] - 1`.
A rule that scores responses in that order (VCBench's `score_responses`) gets them from the
predictions file without a dictionary keyed by (item id, query index): matching a million
predictions becomes a few C-level passes (`predictions.match_responses`). The layout depends on the
items only, so the scored table and both chance baselines of one report compute it once.
"""

from __future__ import annotations

from operator import attrgetter
from typing import NamedTuple

import numpy as np

from statebox.schema import Item, Query


class QueryLayout(NamedTuple):
    queries: list[Query]  # every query point, in order
    counts: np.ndarray  # query points per item (int64)
    starts: np.ndarray  # flat position of each item's first point (int64)
    # item id -> the item's position (its points start at starts[position]); None when two items
    # share an id or some item's Query.index values are not 0, 1, 2, ... (match item by item then)
    index_of: dict[str, int] | None


# Cached by the list's identity (as chance.chance_model); the entry keeps the list alive, so its id
# cannot be reused by another list while the cached layout answers for it.
_LAYOUTS: dict[tuple[int, int], tuple[list[Item], QueryLayout]] = {}


def query_layout(items: list[Item]) -> QueryLayout:
    key = (id(items), len(items))
    entry = _LAYOUTS.get(key)
    if entry is None or entry[0] is not items:
        if len(_LAYOUTS) > 8:
            _LAYOUTS.clear()
        entry = _LAYOUTS[key] = (items, _layout(items))
    return entry[1]


_TARGETS: dict[tuple[int, int], tuple[list[Item], np.ndarray]] = {}


def query_targets(items: list[Item]) -> np.ndarray:
    """Every query point's target as float64, in layout order (for numeric targets: VCBench's counts).

    Cached as `query_layout` is: a report reads them three times (its table, two chance baselines)."""
    key = (id(items), len(items))
    entry = _TARGETS.get(key)
    if entry is None or entry[0] is not items:
        if len(_TARGETS) > 8:
            _TARGETS.clear()
        queries = query_layout(items).queries
        targets = np.fromiter(map(attrgetter("target"), queries), dtype=np.float64, count=len(queries))
        targets.flags.writeable = False  # shared by every caller
        entry = _TARGETS[key] = (items, targets)
    return entry[1]


def _layout(items: list[Item]) -> QueryLayout:
    queries = [query for item in items for query in item.queries]
    counts = np.fromiter(map(len, map(attrgetter("queries"), items)), dtype=np.int64, count=len(items))
    starts = np.cumsum(counts) - counts
    indexes = np.fromiter(map(attrgetter("index"), queries), dtype=np.int64, count=len(queries))
    index_of: dict[str, int] | None = None
    if np.array_equal(indexes, np.arange(len(queries)) - np.repeat(starts, counts)):
        index_of = dict(zip(map(attrgetter("id"), items), range(len(items))))
        if len(index_of) != len(items):
            index_of = None
    return QueryLayout(queries=queries, counts=counts, starts=starts, index_of=index_of)
