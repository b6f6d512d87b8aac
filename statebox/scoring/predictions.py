"""Predictions files (JSONL) and matching predictions to benchmark queries.

A line is `{"id": ..., "query_index": N (streaming only), "response": "raw text",
"clips": ... (EC-Bench, optional)}`; other keys are ignored. A malformed line
stops with `file:line: what is wrong`. Unknown ids, out-of-range query indexes
and duplicates are warnings (the last duplicate wins), never silent.
"""

from __future__ import annotations

from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from statebox.datafiles import iter_jsonl_batches, type_name
from statebox.errors import DataError
from statebox.schema import Item, Prediction
from statebox.collector import collector_paused
from statebox.scoring.core import Answer, Answers
from statebox.scoring.layout import QueryLayout, query_layout


class PredictionLine(NamedTuple):
    id: str
    query_index: int | None
    response: str
    clips: Any = None
    line: int | None = None


def load_predictions(path: str | Path) -> list[PredictionLine]:
    with collector_paused():
        return _read_lines(Path(path))


def _read_lines(path: Path) -> list[PredictionLine]:
    out: list[PredictionLine] = []
    append = out.append
    new = tuple.__new__  # PredictionLine(...) through its generated __new__ costs a Python call per line
    for rows in iter_jsonl_batches(path):
        for line, row in rows:
            # the common line, checked inline: a string id, no or a non-negative int index, a string
            # response, no clips; anything else is checked (and refused) by _from_mapping
            item_id = row.get("id")
            query_index = row.get("query_index")
            response = row.get("response")
            if (type(item_id) is str and type(response) is str and row.get("clips") is None
                    and (query_index is None or (type(query_index) is int and query_index >= 0))):
                append(new(PredictionLine, (item_id, query_index, response, None, line)))
            else:
                append(_from_mapping(row, path, line))
    return out


def _from_mapping(row: dict[str, Any], path: Path | None, line: int | None) -> PredictionLine:
    where = path if path is not None else "predictions"
    if "id" not in row or row["id"] is None:
        raise DataError(where, line, "missing field 'id'")
    if not isinstance(row["id"], (str, int)) or isinstance(row["id"], bool):
        raise DataError(where, line, f"field 'id' must be a string or an integer, got {type_name(row['id'])}")
    query_index = row.get("query_index")
    if query_index is not None and (not isinstance(query_index, int) or isinstance(query_index, bool) or query_index < 0):
        raise DataError(where, line, f"field 'query_index' must be a non-negative integer, got {query_index!r}")
    if "response" not in row:
        raise DataError(where, line, "missing field 'response'")
    response = row["response"]
    if response is None:
        response = ""
    if not isinstance(response, str):
        raise DataError(where, line, f"field 'response' must be a string, got {type_name(response)}")
    clips = row.get("clips")
    if clips is not None and not isinstance(clips, (str, list)):
        raise DataError(where, line, f"field 'clips' must be a string or an array, got {type_name(clips)}")
    return PredictionLine(id=str(row["id"]), query_index=query_index, response=response, clips=clips, line=line)


def normalise(predictions: list[Any]) -> list[PredictionLine]:
    """Accept PredictionLine, schema.Prediction or plain dicts."""
    if set(map(type, predictions)) <= {PredictionLine}:  # already lines (a C-level pass over a million)
        return predictions
    out = []
    for index, p in enumerate(predictions):
        if isinstance(p, PredictionLine):
            out.append(p)
        elif isinstance(p, Prediction):
            out.append(PredictionLine(id=p.id, query_index=p.query_index, response=p.response, clips=p.clips))
        elif isinstance(p, dict):
            out.append(_from_mapping(p, None, index + 1))
        else:
            raise DataError("predictions", index + 1, f"expected a prediction object, got {type(p).__name__}")
    return out


def match(items: list[Item], predictions: list[Any], source: str | Path = "predictions") -> tuple[Answers, list[str]]:
    """Answers keyed by (item id, query index), plus warnings about what did not fit."""
    # id -> (number of query points, their Query.index values when they differ from positions)
    by_id: dict[str, tuple[int, list[int] | None]] = {}
    for item in items:
        indexes = [q.index for q in item.queries]
        by_id[item.id] = (len(indexes), None if indexes == list(range(len(indexes))) else indexes)
    answers: Answers = {}
    unknown: list[str] = []
    out_of_range: list[str] = []
    before = 0
    for p in normalise(predictions):
        known = by_id.get(p.id)
        if known is None:
            unknown.append(p.id)
            continue
        n_queries, positions = known
        index = p.query_index
        if index is None:
            if n_queries > 1:
                raise DataError(source, p.line,
                                f"id '{p.id}' is a streaming question with {n_queries} query points: "
                                "'query_index' is required")
            index = 0
        if index >= n_queries:
            out_of_range.append(f"{p.id}#{index}")
            continue
        answers[(p.id, index if positions is None else positions[index])] = Answer(p.response, p.clips)
        before += 1
    total = sum(len(i.queries) for i in items)
    return answers, _warnings(total, len(answers), unknown, out_of_range, before - len(answers))


def match_responses(items: list[Item], predictions: list[Any],
                    source: str | Path = "predictions") -> tuple[list[str | None], list[str]]:
    """The response to every query point in layout order (None where there is none), and `match`'s
    warnings: what `match` gives, laid out flat, for rules that read the responses only.

    A file whose every line names a known id and an in-range query index (the common file) is
    placed by C-level passes over the lines; any other goes through `match` line by line."""
    layout = query_layout(items)
    lines = normalise(predictions)
    if layout.index_of is not None and lines:
        placed = _place(layout, lines)
        if placed is not None:
            responses, n_placed = placed
            answered = len(responses) - responses.count(None)
            return responses, _warnings(len(responses), answered, [], [], n_placed - answered)
    answers, warnings = match(items, lines, source)
    return responses_in_order(items, answers), warnings


def _place(layout: QueryLayout, lines: list[PredictionLine]) -> tuple[list[str | None], int] | None:
    """(the responses in layout order, lines placed) when every line names a known id and an
    in-range query index, else None. Positions are computed as arrays; a position given twice
    keeps its last line's response, as `match`'s dictionary does."""
    assert layout.index_of is not None
    query_indexes = list(map(itemgetter(1), lines))
    if None in query_indexes:
        return None
    item_of = np.fromiter(map(layout.index_of.get, map(itemgetter(0), lines), repeat(-1)),
                          dtype=np.int64, count=len(lines))
    try:
        indexes = np.array(query_indexes, dtype=np.int64)
    except OverflowError:  # an index past int64 is out of range: `match` says so
        return None
    if int(item_of.min()) < 0 or bool((indexes >= layout.counts[item_of]).any()):
        return None
    positions = layout.starts[item_of] + indexes
    rows = np.arange(len(lines))
    if int(np.bincount(positions, minlength=len(layout.queries)).max()) > 1:
        last = len(positions) - 1 - np.unique(positions[::-1], return_index=True)[1]  # each position's last line
        positions, rows = positions[last], last
    out = np.full(len(layout.queries), None, dtype=object)
    out[positions] = np.fromiter(map(itemgetter(2), lines), dtype=object, count=len(lines))[rows]
    return out.tolist(), len(lines)


def responses_in_order(items: list[Item], answers: Answers) -> list[str | None]:
    """The answers' responses in layout order (item by item, query by query; None where missing)."""
    keys = [(item_id, query.index) for item in items for item_id in (item.id,) for query in item.queries]
    return [None if answer is None else answer.response for answer in map(answers.get, keys)]


def _warnings(total: int, answered: int, unknown: list[str], out_of_range: list[str], duplicates: int) -> list[str]:
    warnings = []
    if unknown:
        warnings.append(f"{len(unknown)} predictions name unknown ids (ignored), e.g. {', '.join(unknown[:3])}")
    if out_of_range:
        warnings.append(f"{len(out_of_range)} predictions have a query_index past the question's query points "
                        f"(ignored), e.g. {', '.join(out_of_range[:3])}")
    if duplicates:
        warnings.append(f"{duplicates} duplicate predictions for the same query: the last one is used")
    missing = total - answered
    if missing:
        warnings.append(f"{missing} of {total} queries have no prediction: scored as 0 "
                        "(EC-Bench: left out of the official denominators, wrong in *_all)")
    return warnings
