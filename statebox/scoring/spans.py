"""EC-Bench evidence spans: parsing `h:mm:ss` clips and the official union-set IoU.

The released evaluator (not the paper's "single merged interval") computes IoU
over the union of merged intervals at integer-second resolution; these functions
reproduce its behaviour, quirks included:
- a value that `ast.literal_eval` turns into a list is read as `[[start, end], ...]`
  pairs whose elements must each be exactly `h:mm:ss` (no fallback to the regex);
- any other text: every `h:mm:ss` is found and consecutive ones are paired
  (`.mmm` suffixes are ignored, an odd last timestamp is dropped);
- intervals with end < start are dropped; touching intervals merge.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

TIME_PATTERN = re.compile(r"(\d{1,2}):(\d{2}):(\d{2})")

Interval = tuple[int, int]


def _seconds(parts: tuple[str, str, str]) -> int:
    hours, minutes, seconds = (int(p) for p in parts)
    return hours * 3600 + minutes * 60 + seconds


def _strict_seconds(value: str) -> int | None:
    match = TIME_PATTERN.fullmatch(value.strip())
    return _seconds(match.groups()) if match else None  # type: ignore[arg-type]


def parse_clips(raw: Any) -> list[Interval]:
    """Intervals (seconds) from a clips value: a list of pairs, or any text holding h:mm:ss pairs."""
    if raw is None or (isinstance(raw, float) and math.isnan(raw)):
        return []
    if isinstance(raw, list):
        intervals: list[Interval] = []
        for pair in raw:
            if isinstance(pair, (list, tuple)) and len(pair) == 2:
                start, end = _strict_seconds(str(pair[0])), _strict_seconds(str(pair[1]))
                if start is not None and end is not None and end >= start:
                    intervals.append((start, end))
        return intervals
    text = str(raw).strip()
    if not text or text.lower() == "nan":
        return []
    try:
        literal = ast.literal_eval(text)
    except Exception:  # noqa: BLE001 - anything literal_eval rejects falls through to the regex
        literal = None
    if isinstance(literal, list):
        return parse_clips(literal)
    tokens = TIME_PATTERN.findall(text)
    intervals = []
    for i in range(0, len(tokens) - 1, 2):
        start, end = _seconds(tokens[i]), _seconds(tokens[i + 1])
        if end >= start:
            intervals.append((start, end))
    return intervals


def merge(intervals: list[Interval]) -> list[Interval]:
    """Sorted, merged intervals; overlapping or touching (start <= last end) ones join."""
    if not intervals:
        return []
    ordered = sorted(intervals)
    merged = [ordered[0]]
    for start, end in ordered[1:]:
        last_start, last_end = merged[-1]
        if start <= last_end:
            merged[-1] = (last_start, max(last_end, end))
        else:
            merged.append((start, end))
    return merged


def union_iou(truth: list[Interval], predicted: list[Interval]) -> float | None:
    """IoU of the two interval sets: None when both are empty, 0.0 when exactly one is."""
    if not truth and not predicted:
        return None
    if not truth or not predicted:
        return 0.0
    a, b = merge(truth), merge(predicted)
    intersection = 0
    i = j = 0
    while i < len(a) and j < len(b):
        overlap = min(a[i][1], b[j][1]) - max(a[i][0], b[j][0])
        if overlap > 0:
            intersection += overlap
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    union = sum(e - s for s, e in a) + sum(e - s for s, e in b) - intersection
    if union <= 0:
        return 0.0
    return intersection / union


def hull_iou(truth: list[Interval], predicted: list[Interval]) -> float | None:
    """The paper's wording (each side merged into one spanning interval); reported as an extra only."""
    if not truth and not predicted:
        return None
    if not truth or not predicted:
        return 0.0
    ts, te = min(s for s, _ in truth), max(e for _, e in truth)
    ps, pe = min(s for s, _ in predicted), max(e for _, e in predicted)
    inter = max(0, min(te, pe) - max(ts, ps))
    union = (te - ts) + (pe - ps) - inter
    return inter / union if union > 0 else 0.0
