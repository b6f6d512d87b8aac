"""VCBench: GPA, MoC and UDA per question over its query points (in `query_index` order), then the mean.

Applicability follows the released `compute_metrics.py`: GPA for every subtype;
MoC for O2-Unique, E1-Action, E1-Transit, E2-Periodic, E2-Episode with n >= 2;
UDA for those plus O1-Snap with n >= 2. Questions where a metric does not apply
are left out of that metric's mean, overall and per subtype.

Invalid or missing answers: the released code cannot handle them (it crashes);
the paper "skips" them without saying how. statebox scores them as wrong, and
says so in the report: the GPA term is 0, a step touching an invalid point is a
UDA mismatch, and the first such step is a MoC violation.

Scoring is vectorised: all query points of all questions are one flat array and
per-question reductions use `numpy.ufunc.reduceat`.
"""

from __future__ import annotations

from itertools import repeat
from operator import attrgetter
from typing import Any

import numpy as np

from statebox.schema import Item, ScoreRow
from statebox.scoring.core import NAN, Answers, ScoredTable
from statebox.scoring.layout import query_layout, query_targets
from statebox.scoring.metrics import gpa_array, gpa_point
from statebox.scoring.parsing import vcbench_number
from statebox.scoring.predictions import responses_in_order

HEADLINE = ("gpa", "moc", "uda")
MOC_SUBTYPES = frozenset({"O2-Unique", "E1-Action", "E1-Transit", "E2-Periodic", "E2-Episode"})
UDA_SUBTYPES = MOC_SUBTYPES | {"O1-Snap"}
COLUMNS = ("gpa", "moc", "uda", "exact_match", "invalid_rate")


def parse_many(responses: list[str | None]) -> np.ndarray:
    """Parsed counts as float64, NaN for invalid or missing answers.

    Each distinct text is parsed once: a model's answers repeat ("3", "I don't know"), and a
    million query points rarely hold more than a few thousand texts. When most texts are
    distinct, those that are plain decimal digits (the common case) are converted by numpy in
    one C loop and the rest go through `vcbench_number`.
    """
    out = np.full(len(responses), np.nan)
    if not responses:
        return out
    distinct = dict.fromkeys(responses)
    texts = None
    if len(distinct) * 4 > len(responses):
        try:
            texts = np.array(["" if r is None else r for r in responses], dtype=np.dtypes.StringDType())
        except UnicodeEncodeError:  # a lone surrogate (valid JSON) numpy's strings cannot hold: parsed one by one
            texts = None
    if texts is None:
        for text in distinct:
            value = None if text is None else vcbench_number(text)
            distinct[text] = NAN if value is None else value
        return np.fromiter(map(distinct.__getitem__, responses), dtype=np.float64, count=len(responses))
    simple = np.strings.isdecimal(texts) & (np.strings.str_len(texts) < 16)
    try:
        out[simple] = texts[simple].astype(np.float64)
    except ValueError:  # a non-ASCII decimal digit numpy will not cast: parse those rows one by one
        simple[:] = False
    for index in np.flatnonzero(~simple):
        text = responses[index]
        if text is None:
            continue
        value = vcbench_number(text)
        out[index] = np.nan if value is None else value
    return out


def flat_layout(items: list[Item]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(targets, start offset of each question, query count of each question)."""
    counts = np.fromiter((len(i.queries) for i in items), dtype=np.int64, count=len(items))
    starts = np.zeros(len(items), dtype=np.int64)
    if len(items):
        np.cumsum(counts[:-1], out=starts[1:])
    targets = np.fromiter((q.target for i in items for q in i.queries), dtype=np.float64, count=int(counts.sum()))
    return targets, starts, counts


def question_metrics(pred: np.ndarray, target: np.ndarray, starts: np.ndarray, counts: np.ndarray,
                     moc_ok: np.ndarray, uda_ok: np.ndarray) -> dict[str, np.ndarray]:
    """Per-question GPA / MoC / UDA (NaN where not applicable) from flat arrays of query points."""
    n_points = len(pred)
    valid = ~np.isnan(pred)
    point_gpa = np.where(valid, gpa_array(np.where(valid, pred, 0.0), target), 0.0)
    exact = (valid & (pred == target)).astype(np.float64)
    if n_points == 0:
        empty = np.full(len(starts), np.nan)
        return {"gpa": empty, "moc": empty, "uda": empty, "exact_match": empty, "invalid_rate": empty}
    gpa = np.add.reduceat(point_gpa, starts) / counts
    exact_rate = np.add.reduceat(exact, starts) / counts
    invalid_rate = np.add.reduceat((~valid).astype(np.float64), starts) / counts

    # Steps between consecutive points; the step that crosses into the next question is masked.
    same_question = np.ones(n_points, dtype=bool)
    same_question[(starts + counts - 1)] = False  # last point of each question has no step inside it
    step_valid = np.append(valid[1:] & valid[:-1], False)
    dp = np.append(np.diff(np.where(valid, pred, 0.0)), 0.0)
    dg = np.append(np.diff(target), 0.0)
    local = np.arange(n_points) - np.repeat(starts, counts)
    last_step = np.repeat(counts - 1, counts)

    violation = same_question & (~step_valid | (dp < 0))
    first_violation = np.minimum.reduceat(np.where(violation, local, last_step), starts)
    denominator = np.maximum(counts - 1, 1)
    moc = np.where(moc_ok & (counts >= 2), first_violation / denominator, np.nan)

    agree = same_question & step_valid & (np.sign(dp) == np.sign(dg))
    uda = np.where(uda_ok & (counts >= 2), np.add.reduceat(agree.astype(np.float64), starts) / denominator, np.nan)
    return {"gpa": gpa, "moc": moc, "uda": uda, "exact_match": exact_rate, "invalid_rate": invalid_rate}


def score_table(items: list[Item], answers: Answers, judge: Any = None) -> ScoredTable:
    return score_responses(items, responses_in_order(items, answers))


def score_responses(items: list[Item], responses: list[str | None]) -> ScoredTable:
    """The table of `responses` in layout order (item by item, query by query; None = missing).

    What `score_table` scores once it has looked the answers up; `statebox score` and the chance
    baselines, whose responses come in that order already (`predictions.match_responses`), start here."""
    return _score_parsed(items, parse_many(responses), responses.count(None))


def score_coded(items: list[Item], texts: list[str], codes: np.ndarray) -> ScoredTable:
    """`score_responses(items, [texts[c] for c in codes])` without the list: each distinct text is
    parsed once and the counts are gathered by code (the chance baselines answer a million query
    points with a few dozen texts)."""
    parsed = np.array([NAN if value is None else value for value in map(vcbench_number, texts)], dtype=np.float64)
    return _score_parsed(items, parsed[codes], 0)


def _score_parsed(items: list[Item], pred: np.ndarray, missing: int) -> ScoredTable:
    layout = query_layout(items)
    moc_ok, uda_ok = _applicable(items)
    values = question_metrics(pred, query_targets(items), layout.starts, layout.counts, moc_ok, uda_ok)
    failures = int(np.isnan(pred).sum()) - missing
    warnings = []
    if failures or missing:
        warnings.append(
            f"VCBench: {failures + missing} of {len(pred)} query points have no valid count "
            f"({missing} missing, {failures} unparseable); they score as wrong (GPA 0, direction mismatch)"
        )
    return ScoredTable(values=values, parse_failures=failures, queries=len(pred), missing=missing, warnings=warnings)


_APPLICABLE: dict[tuple[int, int], tuple[list[Item], tuple[np.ndarray, np.ndarray]]] = {}


def _applicable(items: list[Item]) -> tuple[np.ndarray, np.ndarray]:
    """(MoC applies, UDA applies) per item, by subtype; cached by the list's identity as
    `layout.query_layout` is (a report scores the same items three times)."""
    key = (id(items), len(items))
    entry = _APPLICABLE.get(key)
    if entry is None or entry[0] is not items:
        if len(_APPLICABLE) > 8:
            _APPLICABLE.clear()
        subtypes = list(map(dict.get, map(attrgetter("labels"), items), repeat("counting_subtype"), repeat("")))
        moc_ok = np.fromiter(map(MOC_SUBTYPES.__contains__, subtypes), dtype=bool, count=len(items))
        uda_ok = np.fromiter(map(UDA_SUBTYPES.__contains__, subtypes), dtype=bool, count=len(items))
        moc_ok.flags.writeable = uda_ok.flags.writeable = False
        entry = _APPLICABLE[key] = (items, (moc_ok, uda_ok))
    return entry[1]


def derive(means: dict[str, Any]) -> dict[str, Any]:
    return {name: means[name] for name in COLUMNS}


def score_query(item: Item, query_index: int, response: str, clips: Any = None, judge: Any = None) -> ScoreRow:
    target = item.queries[query_index].target
    value = vcbench_number(response)
    metrics = {"gpa": 0.0 if value is None else gpa_point(value, target)}
    metrics["correct"] = float(value is not None and value == target)
    return ScoreRow(item_id=item.id, query_index=query_index, parsed=value, parse_ok=value is not None, metrics=metrics)
