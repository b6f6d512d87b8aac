"""EOC-Bench: rows of the released HF schema, as a JSON array or JSONL.

Closed questions (single-choice, multi-choice, true/false) have a list of answer
letters; open-ended ones (all Absolute Time Perception) have a one-element list
holding a time string whose first number is the target in seconds. The category
(`video_type`) is mapped to its dimension (Past / Present / Future) as a label.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from statebox.benchmarks import LoadResult
from statebox.benchmarks._io import as_label, field
from statebox.datafiles import read_json_or_jsonl
from statebox.errors import DataError
from statebox.schema import Item, Query

CHOICE_TYPES = ("single-choice", "multi-choice", "true/false", "open-ended")
DIMENSIONS = {
    "Past": ("Object State Retrospection", "Location Retrospection", "Object Location Retrospection",
             "Object Relationship Evolution", "Absolute Time Perception"),
    "Present": ("Immediate State Recognition", "Object Relationship", "Purpose and Function Inference",
                "Anomaly Perception"),
    "Future": ("Trajectory and Motion Prediction", "State Change Prediction", "Dynamic Relationship Prediction"),
}
CATEGORY_TO_DIMENSION = {c.lower(): d for d, cats in DIMENSIONS.items() for c in cats}
FIRST_NUMBER = re.compile(r"\d+\.?\d*")


def load(path: Path) -> LoadResult:
    items = []
    unknown_categories: set[str] = set()
    for index, (line, row) in enumerate(read_json_or_jsonl(path)):
        where = "" if line is not None else f"row {index}"
        items.append(_item(row, path, line, where, unknown_categories))
    warnings = []
    if unknown_categories:
        warnings.append(f"EOC-Bench categories with no known dimension: {sorted(unknown_categories)}")
    return LoadResult(items=items, warnings=warnings)


def _item(row: dict[str, Any], path: Path, line: int | None, where: str, unknown: set[str]) -> Item:
    idx = field(row, "idx", (int, str), path, line, where=where)
    question = field(row, "question", (str,), path, line, where=where)
    video = field(row, "video_path", (str,), path, line, where=where)
    choice_type = field(row, "choice_type", (str,), path, line, where=where)
    if choice_type not in CHOICE_TYPES:
        raise DataError(path, line, f"{where + ': ' if where else ''}choice_type must be one of {', '.join(CHOICE_TYPES)}, got {choice_type!r}")
    answer = field(row, "answer", (list, str), path, line, where=where)
    answers = [str(a) for a in (answer if isinstance(answer, list) else [answer])]
    if not answers:
        raise DataError(path, line, f"{where + ': ' if where else ''}field 'answer' is empty")
    choices_raw = row.get("choices") or {}
    if not isinstance(choices_raw, dict):
        raise DataError(path, line, f"{where + ': ' if where else ''}field 'choices' must be an object {{a, b, c, d}}")
    choices = {str(k).lower(): str(v) for k, v in choices_raw.items() if v is not None and str(v).strip()}

    if choice_type == "open-ended":
        match = FIRST_NUMBER.search(answers[0])
        if not match:
            raise DataError(path, line, f"{where + ': ' if where else ''}open-ended answer {answers[0]!r} holds no number")
        target: Any = float(match.group())
        answer_type = "number"
    else:
        target = sorted(a.strip().lower() for a in answers)
        answer_type = "mcq" if choice_type != "multi-choice" else "set"

    category = as_label(row.get("video_type")) or "unknown"
    labels = {"video_type": category, "choice_type": choice_type}
    dimension = CATEGORY_TO_DIMENSION.get(category.lower())
    if dimension:
        labels["dimension"] = dimension
    else:
        unknown.add(category)
    source = as_label(row.get("video_source"))
    if source:
        labels["video_source"] = source
    meta = {k: v for k, v in row.items() if k not in ("question", "answer", "choices", "video_path", "mask")}
    meta.update({"choices": choices, "answer_raw": answer, "line": line})
    time = row.get("video_time")
    return Item(
        id=str(idx),
        benchmark="eocbench",
        video=video,
        question=question,
        choices=[f"{k.upper()}. {v}" for k, v in sorted(choices.items())],
        answer_type=answer_type,
        target=target,
        queries=[Query(index=0, time=None, target=target)],
        labels=labels,
        meta=meta | {"video_time": float(time) if isinstance(time, (int, float)) else None},
    )
