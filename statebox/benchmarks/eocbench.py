"""EOC-Bench: rows of the released HF schema, as a JSON array or JSONL.

Closed questions (single-choice, multi-choice, true/false) have a list of answer
letters; open-ended ones (all Absolute Time Perception) have a one-element list
holding a time string whose first number is the target in seconds. The category
(`video_type`) is mapped to its dimension (Past / Present / Future) as a label.

Visual prompts: `box` (one [x0, y0, x1, y1] per object), `point` (one [x, y] per
object) and `mask` (one COCO RLE `{counts, size}` or polygon list per object) become
`Item.prompts`, one `VisualPrompt` per `<object N>` (N = the position in those lists);
the workspace draws them on the prompt frame. Box and point also stay in meta (the
synthetic oracle reads the box there); the mask, often large, does not.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypeGuard

from statebox.benchmarks import LoadResult
from statebox.benchmarks._io import as_label, bounded, field
from statebox.datafiles import read_json_or_jsonl
from statebox.errors import DataError
from statebox.schema import AnswerType, Item, MaskRLE, Query, VisualPrompt

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

    answer_type: AnswerType
    if choice_type == "open-ended":
        match = FIRST_NUMBER.search(answers[0])
        if not match:
            raise DataError(path, line, f"{where + ': ' if where else ''}open-ended answer {answers[0]!r} holds no number")
        target: Any = bounded(float(match.group()), path, line, f"{where + ': ' if where else ''}open-ended answer")
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
    prompts = _prompts(row, path, line, where)
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
        prompts=prompts,
    )


def _numbers(value: object, n: int) -> TypeGuard[list[float] | tuple[float, ...]]:
    return (isinstance(value, (list, tuple)) and len(value) == n
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value))


def _prompts(row: dict[str, Any], path: Path, line: int | None, where: str) -> list[VisualPrompt]:
    """One VisualPrompt per object from the row's `box` / `point` / `mask` lists (null entries skipped)."""
    prefix = f"{where}: " if where else ""
    lists: dict[str, list[Any]] = {}
    for key in ("box", "point", "mask"):
        value = row.get(key)
        if value is None:
            continue
        if key == "mask" and isinstance(value, dict):
            value = [value]  # one object's RLE given bare
        if key in ("box", "point") and _numbers(value, 4 if key == "box" else 2):
            value = [value]  # one object's box/point given bare
        if not isinstance(value, list):
            raise DataError(path, line, f"{prefix}field '{key}' must be an array (one entry per object)")
        lists[key] = value
    count = max((len(v) for v in lists.values()), default=0)
    prompts = []
    for index in range(count):
        found: dict[str, Any] = {}
        box = _entry(lists, "box", index)
        if box is not None:
            if not _numbers(box, 4) or box[2] <= box[0] or box[3] <= box[1]:
                raise DataError(path, line, f"{prefix}box {index} must be [x0, y0, x1, y1] with x1 > x0 and y1 > y0, got {box!r}")
            found["box"] = [float(v) for v in box]
        point = _entry(lists, "point", index)
        if point is not None:
            if not _numbers(point, 2):
                raise DataError(path, line, f"{prefix}point {index} must be [x, y], got {point!r}")
            found["point"] = [float(v) for v in point]
        mask = _entry(lists, "mask", index)
        if mask is not None:
            found["mask"] = _mask(mask, index, path, line, prefix)
        if found:
            prompts.append(VisualPrompt(object=index, **found))
    return prompts


def _entry(lists: dict[str, list[Any]], key: str, index: int) -> Any:
    values = lists.get(key) or []
    value = values[index] if index < len(values) else None
    return None if value in (None, [], {}) else value


def _rle_counts(value: object) -> str | list[int] | None:
    """An RLE's `counts` (compressed text or run lengths), or None when it is neither."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(c, int) for c in value):
        return value
    return None


def _mask(value: Any, index: int, path: Path, line: int | None, prefix: str) -> MaskRLE | list[list[float]]:
    """A COCO RLE ({counts, size}) or polygons ([[x, y, x, y, ...], ...]); anything else names the line."""
    if isinstance(value, dict):
        counts, size = _rle_counts(value.get("counts")), value.get("size")
        if counts is None or not _numbers(size, 2) or min(size) <= 0:
            raise DataError(path, line, f"{prefix}mask {index} must be a COCO RLE {{counts, size: [h, w]}}")
        return MaskRLE(counts=counts, size=[int(size[0]), int(size[1])])
    if isinstance(value, list) and value and _numbers(value, len(value)):
        value = [value]  # one polygon given bare
    if (isinstance(value, list) and value and all(isinstance(p, list) and len(p) >= 6 and len(p) % 2 == 0
                                                 and _numbers(p, len(p)) for p in value)):
        return [[float(v) for v in poly] for poly in value]
    raise DataError(path, line, f"{prefix}mask {index} must be a COCO RLE {{counts, size}} or polygons [[x, y, ...], ...]")
