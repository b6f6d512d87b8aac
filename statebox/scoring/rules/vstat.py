"""VSTAT: MCQ letter accuracy, numeric MRA, free-text equality; `score` is the mean over all questions."""

from __future__ import annotations

from typing import Any

from statebox.schema import Item, ScoreRow
from statebox.scoring.core import Answers, ScoredTable, table_from_rows
from statebox.scoring.metrics import mra
from statebox.scoring.parsing import vstat_integer, vstat_mcq, vstat_text

HEADLINE = ("score", "mcq_acc", "numeric_mra")
COLUMNS = ("score", "mcq_acc", "numeric_mra", "text_acc")


def _judge_one(item: Item, response: str) -> tuple[Any, bool, float]:
    """(parsed answer, parsed ok, score in [0, 1]) for one response."""
    if item.answer_type == "mcq":
        letter = vstat_mcq(response)
        return letter, letter is not None, float(letter is not None and letter == str(item.target).upper())
    if item.answer_type == "number":
        value = vstat_integer(response)
        return value, value is not None, mra(value, int(item.target))
    text = vstat_text(response)
    return text, bool(text), float(text == str(item.target).strip().lower())


_COLUMN = {"mcq": "mcq_acc", "number": "numeric_mra", "text": "text_acc"}


def score_table(items: list[Item], answers: Answers, judge: Any = None) -> ScoredTable:
    rows = []
    failures = missing = 0
    for item in items:
        answer = answers.get((item.id, 0))
        if answer is None:
            missing += 1
            value = 0.0
        else:
            _, ok, value = _judge_one(item, answer.response)
            failures += not ok
        rows.append({"score": value, _COLUMN[item.answer_type]: value})
    return ScoredTable(values=table_from_rows(COLUMNS, rows), parse_failures=failures, queries=len(items),
                       missing=missing)


def derive(means: dict[str, Any]) -> dict[str, Any]:
    return {name: means[name] for name in COLUMNS}


def score_query(item: Item, query_index: int, response: str, clips: Any = None, judge: Any = None) -> ScoreRow:
    parsed, ok, value = _judge_one(item, response)
    return ScoreRow(item_id=item.id, query_index=query_index, parsed=parsed, parse_ok=ok,
                    metrics={"score": value, _COLUMN[item.answer_type]: value, "correct": float(value == 1.0)})
