"""VCBench: `vcbench_eval.jsonl` (one row per query point) is authoritative for scoring.

Rows are grouped by question `id` and ordered by `query_index` (the order the
official metrics use, even where query times are not chronological). When a
`vcbench_data.jsonl` (one row per question) sits beside the eval file, the two
are compared and disagreements become warnings: the files are known to differ
for hundreds of ids, and a user should see that rather than silently mix them.
A `vcbench_data.jsonl`-style file given directly is also accepted (with a warning).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from statebox.benchmarks import LoadResult
from statebox.benchmarks._io import as_label, bounded, field
from statebox.datafiles import iter_jsonl
from statebox.errors import DataError
from statebox.schema import Item, Query

SUBTYPES = ("O1-Snap", "O1-Delta", "O2-Unique", "O2-Gain", "E1-Action", "E1-Transit", "E2-Periodic", "E2-Episode")
DATA_FILE_NAME = "vcbench_data.jsonl"


def load(path: Path) -> LoadResult:
    rows = list(iter_jsonl(path))
    if rows and "query_points" in rows[0][1] and "query_index" not in rows[0][1]:
        items = [_item_from_data_row(row, path, line) for line, row in rows]
        return LoadResult(
            items=items,
            warnings=[f"{path.name} is a per-question (vcbench_data) file; vcbench_eval.jsonl is authoritative for scoring"],
        )
    items = _items_from_eval_rows(rows, path)
    warnings: list[str] = []
    unknown = sorted({i.labels["counting_subtype"] for i in items} - set(SUBTYPES))
    if unknown:
        warnings.append(f"unknown counting_subtype values {unknown}: MoC/UDA are not computed for them")
    sibling = path.with_name(DATA_FILE_NAME)
    if sibling.exists() and sibling.resolve() != path.resolve():
        warnings.extend(compare_with_data_file(items, sibling))
    return LoadResult(items=items, warnings=warnings)


def _items_from_eval_rows(rows: list[tuple[int, dict[str, Any]]], path: Path) -> list[Item]:
    grouped: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    order: list[str] = []
    for line, row in rows:
        qid = field(row, "id", (str, int), path, line)
        field(row, "query_index", (int,), path, line)
        field(row, "question", (str,), path, line)
        field(row, "video_path", (str,), path, line)
        field(row, "counting_subtype", (str,), path, line)
        field(row, "query_time", (int, float), path, line)
        count = field(row, "count", (int, float), path, line)
        if isinstance(count, float) and not count.is_integer():
            raise DataError(path, line, f"field 'count' must be a whole number, got {count}")
        bounded(count, path, line, "field 'count'")
        key = str(qid)
        if key not in grouped:
            order.append(key)
        grouped[key].append((line, row))

    items = []
    for key in order:
        points = sorted(grouped[key], key=lambda lr: lr[1]["query_index"])
        indexes = [r["query_index"] for _, r in points]
        if indexes != list(range(len(points))):
            line = points[0][0]
            raise DataError(path, line, f"question '{key}': query_index values {indexes} are not 0..{len(points) - 1}")
        first_line, first = points[0]
        for line, row in points[1:]:
            for name in ("question", "video_path", "counting_subtype"):
                if row[name] != first[name]:
                    raise DataError(path, line, f"question '{key}': '{name}' differs from line {first_line}")
        queries = [
            Query(
                index=row["query_index"],
                time=float(row["query_time"]),
                target=int(row["count"]),
                meta={"q_id": row.get("q_id"), "line": line},
            )
            for line, row in points
        ]
        items.append(_make_item(key, first, queries, first_line))
    return items


def _make_item(key: str, row: dict[str, Any], queries: list[Query], line: int | None) -> Item:
    subtype = row["counting_subtype"]
    labels = {
        "counting_subtype": subtype,
        "counting_type": as_label(row.get("counting_type")) or subtype.split("-")[0],
    }
    source = as_label(row.get("source_dataset"))
    if source:
        labels["source_dataset"] = source
    return Item(
        id=key,
        benchmark="vcbench",
        video=row["video_path"],
        question=row["question"],
        answer_type="number",
        target=queries[-1].target,
        queries=queries,
        labels=labels,
        meta={"source_dataset": row.get("source_dataset"), "line": line},
    )


def _item_from_data_row(row: dict[str, Any], path: Path, line: int) -> Item:
    key = str(field(row, "id", (str, int), path, line))
    field(row, "question", (str,), path, line)
    field(row, "video_path", (str,), path, line)
    field(row, "counting_subtype", (str,), path, line)
    points = field(row, "query_points", (dict,), path, line)
    times = field(points, "time", (list,), path, line, where="query_points")
    counts = field(points, "count", (list,), path, line, where="query_points")
    if len(times) != len(counts) or not times:
        raise DataError(path, line, "query_points: 'time' and 'count' must be non-empty and of equal length")
    queries = []
    for i, (t, c) in enumerate(zip(times, counts)):
        try:  # as before, a number's text is taken too (`float("4.5")`, `int("3")`)
            time, count = float(t), int(c)
        except (TypeError, ValueError, OverflowError):
            raise DataError(path, line, f"query_points: point {i}: time {str(t)[:40]!r} and count {str(c)[:40]!r} "
                                        "must be numbers, the count a whole one") from None
        bounded(time, path, line, f"query_points: point {i}: time")
        bounded(count, path, line, f"query_points: point {i}: count")
        queries.append(Query(index=i, time=time, target=count))
    return _make_item(key, row, queries, line)


def compare_with_data_file(items: list[Item], data_path: Path) -> list[str]:
    """Warnings describing where `vcbench_data.jsonl` disagrees with the eval file (by question id)."""
    try:
        data_items = {i.id: i for i in (_item_from_data_row(r, data_path, n) for n, r in iter_jsonl(data_path))}
    except DataError as exc:
        return [f"ignored {data_path.name} beside the eval file: {exc}"]
    eval_items = {i.id: i for i in items}
    only_eval = sorted(set(eval_items) - set(data_items))
    only_data = sorted(set(data_items) - set(eval_items))
    different_question = []
    different_points = []
    for qid in sorted(set(eval_items) & set(data_items)):
        a, b = eval_items[qid], data_items[qid]
        if (a.question, a.video, a.labels["counting_subtype"]) != (b.question, b.video, b.labels["counting_subtype"]):
            different_question.append(qid)
        elif [(q.time, q.target) for q in a.queries] != [(q.time, q.target) for q in b.queries]:
            different_points.append(qid)
    # Counted over the eval file's ids, the questions scoring actually uses.
    disagree = len(only_eval) + len(different_question) + len(different_points)
    if not disagree and not only_data:
        return []
    return [
        f"{data_path.name} disagrees with the eval file for {disagree} of {len(eval_items)} question ids "
        f"({len(different_question)} different questions, {len(different_points)} different query times or counts, "
        f"{len(only_eval)} missing from {data_path.name}; {len(only_data)} ids only in {data_path.name}); "
        "the eval file is used for scoring"
    ]
