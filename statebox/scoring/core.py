"""Shared shapes for the per-benchmark rules.

Every rule module turns (items, answers) into a `ScoredTable`: one float per item
per metric, NaN where the metric does not count that item (an MCQ item has no
MRA; an empty EC-Bench answer leaves the official denominators). Everything
after that — overall means, label breakdowns, bootstrap CIs, chance baselines —
is generic numpy over that table, so each rule states only its benchmark's logic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np

from statebox.schema import Item, ScoreRow

NAN = float("nan")


class Answer(NamedTuple):
    """One prediction: the raw response text and, for EC-Bench, the predicted clips.

    A NamedTuple, not a dataclass: a million of these are built per large scoring run.
    """

    response: str
    clips: Any = None


Answers = dict[tuple[str, int], Answer]


@dataclass
class ScoredTable:
    values: dict[str, np.ndarray]
    parse_failures: int = 0
    queries: int = 0
    missing: int = 0
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


class Rules(Protocol):
    """What a per-benchmark rule module provides (statebox/scoring/rules/<bench>.py)."""

    HEADLINE: tuple[str, ...]

    def score_table(self, items: list[Item], answers: Answers, judge: Any) -> ScoredTable: ...

    def derive(self, means: dict[str, Any]) -> dict[str, Any]: ...

    def score_query(self, item: Item, query_index: int, response: str, clips: Any, judge: Any) -> ScoreRow: ...


def table_from_rows(names: tuple[str, ...], rows: list[dict[str, float]]) -> dict[str, np.ndarray]:
    """Columns from per-item dicts (a missing key is NaN)."""
    return {name: np.array([row.get(name, NAN) for row in rows], dtype=np.float64).reshape(len(rows)) for name in names}


def nan_if_none(value: float | None) -> float:
    return NAN if value is None else float(value)
