"""EC-Bench evidence spans: the official union-set IoU over parsed `h:mm:ss` clips.

The released evaluator (not the paper's "single merged interval") computes IoU
over the union of merged intervals at integer-second resolution; these functions
reproduce its behaviour: touching intervals merge. The clips text itself is read by
`statebox/clip_spans.py` (base layer: the EC-Bench loader reads the same format).
"""

from __future__ import annotations

from statebox.clip_spans import Interval, parse_clips

__all__ = ["Interval", "hull_iou", "merge", "parse_clips", "union_iou"]  # parse_clips: read here by the scorer and its tests


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
