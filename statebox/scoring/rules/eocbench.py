"""EOC-Bench: exact letter-set match for closed questions, MSTA for open-ended time questions.

`accuracy` is the question-weighted mean over all items with open-ended items
adding their MSTA (the released `cal_metrics`), parsed with the released choice
parser (tags, comma split, difflib fallback to the most similar option).
`accuracy_strict` uses statebox's strict parser (letters only, no fallback).
`msta` is the mean MSTA over open-ended items; `msta@a` the per-threshold hit rates.
A missing prediction scores 0 (the released code would have parsed it as "a").
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from statebox.schema import Item, ScoreRow
from statebox.scoring.core import Answers, ScoredTable, table_from_rows
from statebox.scoring.metrics import MSTA_ALPHAS, msta_hits
from statebox.scoring.parsing import eocbench_choice, eocbench_choice_strict, eocbench_time, eocbench_time_found

HEADLINE = ("accuracy", "msta")
THRESHOLD_COLUMNS = tuple(f"msta@{a}" for a in MSTA_ALPHAS)
COLUMNS = ("accuracy", "accuracy_strict", "msta", *THRESHOLD_COLUMNS, "closed_accuracy", "closed_accuracy_strict",
           "single_acc", "multi_acc", "partial_acc")


def _partial(pred: list[str], target: list[str]) -> float:
    """The released `adjust_acc`: 1/|G| per predicted letter in G, 0 if any predicted letter is not in G."""
    if any(p not in target for p in pred):
        return 0.0
    return len(pred) / len(target)


def item_row(item: Item, response: str | None) -> tuple[dict[str, float], Any, bool]:
    """Per-item metric values, the parsed answer, and whether the strict parse succeeded."""
    if item.answer_type == "number":
        target = float(item.target)
        if response is None:
            hits, parsed, ok = [False] * len(MSTA_ALPHAS), None, False
        else:
            parsed = eocbench_time(response)
            hits, ok = msta_hits(parsed, target), eocbench_time_found(response)
        value = sum(hits) / len(hits)
        row = {"accuracy": value, "accuracy_strict": value if ok else 0.0, "msta": value}
        row.update({col: float(hit) for col, hit in zip(THRESHOLD_COLUMNS, hits)})
        return row, parsed, ok
    target_letters = sorted(item.target)
    if response is None:
        official, strict = None, None
    else:
        official = eocbench_choice(response, item.meta.get("choices") or {})
        strict = eocbench_choice_strict(response)
    correct = float(official is not None and sorted(official) == target_letters)
    correct_strict = float(strict is not None and strict == target_letters)
    row = {"accuracy": correct, "accuracy_strict": correct_strict, "closed_accuracy": correct,
           "closed_accuracy_strict": correct_strict,
           "partial_acc": _partial(official, target_letters) if official is not None else 0.0}
    row["single_acc" if len(target_letters) == 1 else "multi_acc"] = correct
    return row, official, strict is not None


def score_table(items: list[Item], answers: Answers, judge: Any = None) -> ScoredTable:
    rows = []
    failures = missing = 0
    for item in items:
        answer = answers.get((item.id, 0))
        missing += answer is None
        row, _, ok = item_row(item, answer.response if answer else None)
        failures += answer is not None and not ok
        rows.append(row)
    warnings = []
    kinds = Counter(i.labels.get("choice_type") for i in items)
    if failures:
        warnings.append(f"EOC-Bench: {failures} responses fail the strict parser (the official parser "
                        "still maps them to an option by similarity)")
    return ScoredTable(values=table_from_rows(COLUMNS, rows), parse_failures=failures, queries=len(items),
                       missing=missing, warnings=warnings, extra={"choice_types": dict(kinds)})


def derive(means: dict[str, Any]) -> dict[str, Any]:
    return {name: means[name] for name in COLUMNS}


def score_query(item: Item, query_index: int, response: str, clips: Any = None, judge: Any = None) -> ScoreRow:
    row, parsed, ok = item_row(item, response)
    metrics = {"correct": float(row["accuracy"] == 1.0), "accuracy": row["accuracy"]}
    if "msta" in row:
        metrics["msta"] = row["msta"]
    return ScoreRow(item_id=item.id, query_index=query_index, parsed=parsed, parse_ok=ok, metrics=metrics)
