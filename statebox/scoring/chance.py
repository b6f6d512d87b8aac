"""Chance baselines computed from the annotations themselves.

- `random`: a uniformly random MCQ letter (or letter set), or a random number from
  the answer range of the item's group;
- `frequency`: the most frequent answer of the item's group, or for numeric
  metrics the best constant (the value maximising the benchmark's metric over
  the group's targets).

Groups follow each paper's baseline: VSTAT per task, VCBench per subtype,
EC-Bench per category (A-F), EOC-Bench per category and question type,
CP-Bench per setting. A model that does not beat these has learned nothing
from the video; reports print them beside every score.
"""

from __future__ import annotations

import random as _random
from collections import Counter, defaultdict
from functools import cached_property
from itertools import repeat
from operator import attrgetter
from typing import Any

import numpy as np

from statebox.errors import UserError
from statebox.schema import Item
from statebox.scoring.judge import split_items
from statebox.scoring.layout import query_layout, query_targets
from statebox.scoring.metrics import gpa_array, mra, msta
from statebox.scoring.parsing import ecbench_normalize, ecbench_numbers
from statebox.scoring.randints import randint_sequence

KINDS = ("random", "frequency")
MAX_CONSTANT_SPAN = 2000


def _randint(rng: Any, low: int, high: int) -> int:
    """Uniform integer in [low, high] from a numpy Generator or a random.Random."""
    if isinstance(rng, _random.Random):
        return rng.randint(low, high)
    return int(rng.integers(low, high + 1))


def _uniform(rng: Any, low: float, high: float) -> float:
    return rng.uniform(low, high) if isinstance(rng, _random.Random) else float(rng.uniform(low, high))


def _pick(rng: Any, options: list[Any]) -> Any:
    return options[_randint(rng, 0, len(options) - 1)]


def _mode(values: list[Any]) -> Any:
    counts = Counter(values)
    best = max(counts.values())
    return sorted((v for v, c in counts.items() if c == best), key=str)[0]


def _best_constant(targets: list[float], score) -> float:
    """The constant c maximising sum(score(c, g)): every integer in [min, max] when that span is small.

    `score` is applied to numpy arrays (one candidate against all targets at once).
    """
    values = np.asarray(targets, dtype=np.float64)
    low, high = int(np.floor(values.min())), int(np.ceil(values.max()))
    if high - low <= MAX_CONSTANT_SPAN:
        candidates: list[float] = list(range(low, high + 1))
    else:
        candidates = sorted(set(targets))
    best, best_total = candidates[0], -1.0
    for c in candidates:
        total = float(np.sum(score(c, values)))
        if total > best_total + 1e-12:
            best, best_total = c, total
    return best


def _mra_many(c: float, g: np.ndarray) -> np.ndarray:
    return np.fromiter((mra(int(c), int(x)) for x in g), dtype=np.float64, count=len(g))


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class ChanceModel:
    """Per-group answer statistics of one benchmark's items, computed once."""

    def __init__(self, bench: str, items: list[Item]) -> None:
        self.bench = bench
        self._items = items
        self._cache: dict[tuple[str, str], Any] = {}
        self._handler = getattr(self, f"_{bench}")

    @cached_property
    def groups(self) -> dict[str, list[Item]]:
        """Group name -> its items (built on first use: `respond_coded` reads arrays instead)."""
        groups: dict[str, list[Item]] = defaultdict(list)
        for item in self._items:
            groups[self.group_of(item)].append(item)
        return groups

    @cached_property
    def _group_by_id(self) -> dict[str, str]:
        return {item.id: self.group_of(item) for item in self._items}

    def group_of(self, item: Item) -> str:
        labels = item.labels
        if self.bench == "vstat":
            return f"{labels.get('source_task', '')}|{item.answer_type}"
        if self.bench == "vcbench":
            return labels.get("counting_subtype", "")
        if self.bench == "ecbench":
            return f"{labels.get('question_type', '')}|{labels.get('task_type', '')}"
        if self.bench == "eocbench":
            return f"{labels.get('video_type', '')}|{labels.get('choice_type', '')}"
        return labels.get("setting", "")

    @cached_property
    def _group_codes(self) -> tuple[list[str], np.ndarray]:
        """(group names in order of first appearance, each item's index into them)."""
        if self.bench == "vcbench":  # group_of's rule, without a call per item
            groups = list(map(dict.get, map(attrgetter("labels"), self._items), repeat("counting_subtype"), repeat("")))
        else:
            groups = list(map(self.group_of, self._items))
        index = {name: code for code, name in enumerate(dict.fromkeys(groups))}
        return list(index), np.fromiter(map(index.__getitem__, groups), dtype=np.int64, count=len(groups))

    def _stat(self, group: str, name: str, compute) -> Any:
        return self._computed(group, name, lambda: compute(self.groups.get(group, [])))

    def _computed(self, group: str, name: str, compute) -> Any:
        """A group statistic, computed once (shared by `respond` and `respond_coded`)."""
        key = (group, name)
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    # ------------------------------------------------------------ per benchmark

    def respond(self, item: Item, query_index: int, kind: str, rng: Any) -> str:
        if kind not in KINDS:
            raise UserError(f"unknown chance baseline '{kind}' (expected random or frequency)")
        group = self._group_by_id.get(item.id) or self.group_of(item)
        return self._handler(item, query_index, kind, rng, group)

    def _vstat(self, item: Item, qi: int, kind: str, rng: Any, group: str) -> str:
        if item.answer_type == "mcq":
            if kind == "random":
                return "ABCD"[_randint(rng, 0, max(1, min(4, len(item.choices))) - 1)]
            return self._stat(group, "mode", lambda its: _mode([str(i.target) for i in its]))
        if item.answer_type == "number":
            low, high = self._stat(group, "range", lambda its: (min(int(i.target) for i in its),
                                                                 max(int(i.target) for i in its)))
            if kind == "random":
                return str(_randint(rng, low, high))
            return _fmt(self._stat(group, "best", lambda its: _best_constant([int(i.target) for i in its], _mra_many)))
        texts = self._stat(group, "texts", lambda its: [str(i.target) for i in its])
        return _pick(rng, texts) if kind == "random" else _mode(texts)

    def respond_all(self, items: list[Item], kind: str, rng: Any) -> list[str]:
        """`respond` for every query point of `items` in order (item by item, query by query), drawing
        from `rng` exactly as that loop would: the same answers, without a call per query where the
        benchmark's answer is one draw from a per-group range (VCBench) or one constant per group."""
        if kind not in KINDS:
            raise UserError(f"unknown chance baseline '{kind}' (expected random or frequency)")
        if self.bench != "vcbench" or not isinstance(rng, _random.Random):
            return [self.respond(item, position, kind, rng) for item in items for position in range(len(item.queries))]
        out: list[str] = []
        ranges: dict[str, tuple[int, int]] = {}
        constants: dict[str, str] = {}
        randint = rng.randint  # what _randint calls for a random.Random
        for item in items:
            group = self._group_by_id.get(item.id) or self.group_of(item)
            if kind == "random":
                bounds = ranges.get(group)
                if bounds is None:
                    bounds = ranges[group] = self._vcbench_range(group)
                low, high = bounds
                out.extend([str(randint(low, high)) for _ in item.queries])
            else:
                constant = constants.get(group)
                if constant is None:  # the frequency answer draws nothing
                    constant = constants[group] = self._vcbench(item, 0, kind, rng, group)
                out.extend([constant] * len(item.queries))
        return out

    def respond_coded(self, items: list[Item], kind: str, rng: Any) -> tuple[list[str], np.ndarray] | None:
        """`respond_all` as (distinct texts, each query point's index into them), drawing the same
        numbers from `rng`; None (nothing drawn) where there is no such shortcut.

        VCBench with a `random.Random` and the items this model was built from, with unique ids
        (so an item's group is its own subtype): each answer is one `randint` from its group's
        target range, drawn in bulk (`randints.randint_sequence`), or its group's constant. The
        group statistics come from the flat target array: a group's targets are its items' query
        points in item order, as `_vcbench_range` and `_vcbench` collect them."""
        if kind not in KINDS:
            raise UserError(f"unknown chance baseline '{kind}' (expected random or frequency)")
        layout = query_layout(items)
        if (self.bench != "vcbench" or not isinstance(rng, _random.Random) or items is not self._items
                or layout.index_of is None):
            return None
        targets = query_targets(items)
        names, item_group = self._group_codes
        query_group = np.repeat(item_group, layout.counts)
        members = [np.flatnonzero(query_group == code) for code in range(len(names))]
        if any(len(m) == 0 for m in members) or np.isnan(targets).any():
            return None  # an item without query points, or a NaN target: the plain loop's behaviour
        if kind == "frequency":
            constants = [self._computed(name, "best", lambda m=m: _best_constant(
                targets[m].tolist(), lambda c, g: gpa_array(np.full_like(g, c), g))) for name, m in zip(names, members)]
            return [_fmt(constant) for constant in constants], query_group
        bounds = np.array([self._computed(name, "range", lambda m=m: (int(targets[m].min()), int(targets[m].max())))
                           for name, m in zip(names, members)], dtype=np.int64).reshape(len(names), 2)
        values = randint_sequence(rng, bounds[query_group, 0], bounds[query_group, 1])
        if len(values) == 0:
            return [], np.zeros(0, dtype=np.int64)
        low, high = int(values.min()), int(values.max())
        if high - low < len(values):  # the usual small range: a value's code is its offset
            return [str(v) for v in range(low, high + 1)], values - low
        distinct, codes = np.unique(values, return_inverse=True)
        return [str(v) for v in distinct.tolist()], codes.astype(np.int64)

    def _vcbench_range(self, group: str) -> tuple[int, int]:
        targets = self._stat(group, "targets", lambda its: [float(q.target) for i in its for q in i.queries])
        return self._stat(group, "range", lambda its: (int(min(targets)), int(max(targets))))

    def _vcbench(self, item: Item, qi: int, kind: str, rng: Any, group: str) -> str:
        targets = self._stat(group, "targets", lambda its: [float(q.target) for i in its for q in i.queries])
        if kind == "random":
            low, high = self._vcbench_range(group)
            return str(_randint(rng, low, high))
        return _fmt(self._stat(group, "best", lambda its: _best_constant(targets, lambda c, g: gpa_array(
            np.full_like(g, c), g))))

    def _ecbench(self, item: Item, qi: int, kind: str, rng: Any, group: str) -> str:
        if item.labels.get("task_type") == "Counting":
            if kind == "random":
                low, high = self._stat(group, "range", lambda its: _number_range(
                    [n[0] for n in (ecbench_numbers(ecbench_normalize(i.target)) for i in its) if n]))
                return _fmt(_randint(rng, low, high))
            return self._stat(group, "mode", lambda its: _mode([ecbench_normalize(i.target) for i in its]))
        pool = self._stat(group, "items", lambda its: [x for i in its for x in split_items(str(i.target))])
        if kind == "random":
            return _pick(rng, pool)
        return self._stat(group, "mode", lambda its: _mode_item(pool))

    def _eocbench(self, item: Item, qi: int, kind: str, rng: Any, group: str) -> str:
        if item.answer_type == "number":
            if kind == "random":
                length = item.meta.get("video_time")
                if not length:
                    length = 2 * max(float(i.target) for i in self.groups[group])
                return f"{_uniform(rng, 0.0, float(length)):.1f}"
            targets = self._stat(group, "targets", lambda its: [float(i.target) for i in its])
            return _fmt(self._stat(group, "best", lambda its: _best_eoc_constant(targets)))
        if kind == "random":
            letters = sorted((item.meta.get("choices") or {}).keys()) or ["a", "b", "c", "d"]
            if item.labels.get("choice_type") == "multi-choice":
                size = _randint(rng, 1, len(letters))
                chosen = sorted(letters[i] for i in _sample(rng, len(letters), size))
            else:
                chosen = [_pick(rng, letters)]
            return ", ".join(c.upper() for c in chosen)
        best = self._stat(group, "mode", lambda its: _mode([", ".join(str(t).upper() for t in i.target) for i in its]))
        return best

    def _cpbench(self, item: Item, qi: int, kind: str, rng: Any, group: str) -> str:
        low, high = self._stat(group, "range", lambda its: _number_range([int(i.target) for i in its]))
        if kind == "random":
            return str(_randint(rng, low, high))
        return str(self._stat(group, "mode", lambda its: _mode([int(i.target) for i in its])))


def _number_range(values: list[float]) -> tuple[int, int]:
    return (int(min(values)), int(max(values))) if values else (0, 0)


def _sample(rng: Any, n: int, k: int) -> list[int]:
    if isinstance(rng, _random.Random):
        return rng.sample(range(n), k)
    return [int(i) for i in rng.choice(n, size=k, replace=False)]


def _mode_item(pool: list[str]) -> str:
    normal = [p.strip().lower() for p in pool]
    top = _mode(normal)
    return next(p for p, n in zip(pool, normal) if n == top)


def _best_eoc_constant(targets: list[float]) -> float:
    candidates = sorted(set(targets))
    return max(candidates, key=lambda c: (sum(msta(c, g) for g in targets), -c))


# Cached by the list's identity; the entry keeps the list itself alive, so its id cannot be
# reused by a different (e.g. subset) list while the cached model answers for it.
_MODELS: dict[tuple[str, int, int], tuple[list[Item], ChanceModel]] = {}


def chance_model(bench: str, items: list[Item]) -> ChanceModel:
    key = (bench, id(items), len(items))
    entry = _MODELS.get(key)
    if entry is None or entry[0] is not items:
        if len(_MODELS) > 8:
            _MODELS.clear()
        entry = _MODELS[key] = (items, ChanceModel(bench, items))
    return entry[1]


def chance_response(bench: str, item: Item, query_index: int, items: list[Item], kind: str, rng: Any) -> str:
    """A response text for the `random` or `frequency` baseline, computed from `items`' annotations."""
    return chance_model(bench, items).respond(item, query_index, kind, rng)
