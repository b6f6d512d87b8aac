"""CP-Bench: count accuracy on the panning (main) videos, on the static controls, and the drop.

The paper states only "the predicted integer is compared with the ground truth";
statebox parses the first integer (then the first number word) and scores an
answer without one as wrong. Extras on the main set: per-count accuracy
(`accuracy_count_<k>`), within-one, MAE and signed bias over parseable answers,
under/over-count rates.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from statebox.schema import Item, ScoreRow
from statebox.scoring.core import Answers, ScoredTable, table_from_rows
from statebox.scoring.parsing import cpbench_count

HEADLINE = ("accuracy", "control_accuracy", "drop")
BASE = ("accuracy", "control_accuracy", "within1", "mae", "bias", "under_rate", "over_rate",
        "control_within1", "control_mae")


def item_row(item: Item, response: str | None) -> tuple[dict[str, float], int | None]:
    target = int(item.target)
    parsed = cpbench_count(response) if response is not None else None
    correct = float(parsed is not None and parsed == target)
    within = float(parsed is not None and abs(parsed - target) <= 1)
    if item.labels.get("setting") == "control":
        row = {"control_accuracy": correct, "control_within1": within}
        if parsed is not None:
            row["control_mae"] = float(abs(parsed - target))
        return row, parsed
    row = {"accuracy": correct, "within1": within, f"accuracy_count_{target}": correct,
           "under_rate": float(parsed is not None and parsed < target),
           "over_rate": float(parsed is not None and parsed > target)}
    if parsed is not None:
        row["mae"] = float(abs(parsed - target))
        row["bias"] = float(parsed - target)
    return row, parsed


def columns_for(items: list[Item]) -> tuple[str, ...]:
    counts = sorted({int(i.target) for i in items if i.labels.get("setting") != "control"})
    return BASE + tuple(f"accuracy_count_{k}" for k in counts)


def score_table(items: list[Item], answers: Answers, judge: Any = None) -> ScoredTable:
    rows = []
    failures = missing = 0
    for item in items:
        answer = answers.get((item.id, 0))
        missing += answer is None
        row, parsed = item_row(item, answer.response if answer else None)
        failures += answer is not None and parsed is None
        rows.append(row)
    return ScoredTable(values=table_from_rows(columns_for(items), rows), parse_failures=failures,
                       queries=len(items), missing=missing)


def derive(means: dict[str, Any]) -> dict[str, Any]:
    out = dict(means)
    out["drop"] = np.subtract(means["control_accuracy"], means["accuracy"])
    return out


def score_query(item: Item, query_index: int, response: str, clips: Any = None, judge: Any = None) -> ScoreRow:
    row, parsed = item_row(item, response)
    correct = row.get("accuracy", row.get("control_accuracy", 0.0))
    metrics = {"correct": correct}
    if parsed is not None:
        metrics["abs_error"] = float(abs(parsed - int(item.target)))
    return ScoreRow(item_id=item.id, query_index=query_index, parsed=parsed, parse_ok=parsed is not None,
                    metrics=metrics)
