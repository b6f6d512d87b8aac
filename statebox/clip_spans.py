"""EC-Bench's evidence clips as text -> integer-second intervals: the one reading of the format.

Two sides read the same `clips` text: the EC-Bench loader (the ground truth's spans become
`Item.evidence`) and the EC-Bench scorer (a response's clips, for the span IoU). It lives here, in
the base layer, because benchmarks and scoring never import each other; the IoU itself stays in
`statebox/scoring/spans.py`.

The released evaluator's reading, quirks included:
- a value that `ast.literal_eval` turns into a list is read as `[[start, end], ...]`
  pairs whose elements must each be exactly `h:mm:ss` (no fallback to the regex);
- any other text: every `h:mm:ss` is found and consecutive ones are paired
  (`.mmm` suffixes are ignored, an odd last timestamp is dropped);
- intervals with end < start are dropped.
"""

from __future__ import annotations

import ast
import math
import re

TIME_PATTERN = re.compile(r"(\d{1,2}):(\d{2}):(\d{2})")

Interval = tuple[int, int]


def _seconds(hours: str, minutes: str, seconds: str) -> int:
    return int(hours) * 3600 + int(minutes) * 60 + int(seconds)


def _strict_seconds(value: str) -> int | None:
    match = TIME_PATTERN.fullmatch(value.strip())
    return _seconds(match[1], match[2], match[3]) if match else None


def parse_clips(raw: object) -> list[Interval]:
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
        start, end = _seconds(*tokens[i]), _seconds(*tokens[i + 1])
        if end >= start:
            intervals.append((start, end))
    return intervals
