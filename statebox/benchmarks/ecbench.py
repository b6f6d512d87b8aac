"""EC-Bench: `dataset.csv`, one row per query (Counting or Enumeration, categories A-F).

`video_url` is given only on a video's first row, so it is forward-filled by
`video_id`. `clips` (evidence spans), `answer` and `count_details` are ground
truth: they live in the Item's target/evidence/meta, never in the question.
`video_type` is normalised (`sport` -> `sports`, blank -> `unknown`) for the
genre breakdown; the raw value stays in meta.

Transcripts: the release caches Whisper transcripts in `transcript.csv` (columns
`video_id, whisper_model, include_timestamps, text, timestamped_text, ...`, video ids
written as floats, "1.0"). When that file sits beside the annotation file, each item
of a listed video gets its `timestamped_text` (`[HH:MM:SS.mmm - HH:MM:SS.mmm] text`
lines) as `Item.transcript`; the workspace shows it only under `media.transcripts`.
"""

from __future__ import annotations

import csv
from pathlib import Path

from statebox.benchmarks import LoadResult
from statebox.errors import DataError
from statebox.schema import Item, Query, Span
from statebox.clip_spans import parse_clips
from statebox.userfiles import TRANSCRIPT_LINE_MAX_BYTES, iter_lines

REQUIRED = ("video_id", "question_id", "question_type", "task_type", "question", "answer")
TASKS = ("Counting", "Enumeration")
GENRE_ALIASES = {"sport": "sports", "": "unknown"}


def load(path: Path) -> LoadResult:
    items: list[Item] = []
    urls: dict[str, str] = {}
    lines = iter_lines(path, what="data file")  # regular file, size and line caps (statebox/userfiles.py)
    reader = csv.reader(line for _, line in lines)
    try:
        header = next(reader)
    except StopIteration:
        raise DataError(path, 1, "empty file (expected a CSV header)") from None
    except csv.Error as exc:
        raise DataError(path, 1, f"not valid CSV ({exc})") from None
    columns = [c.strip() for c in header]
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise DataError(path, 1, f"missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    position = {name: i for i, name in enumerate(columns)}
    start = reader.line_num + 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise DataError(path, start, f"not valid CSV ({exc})") from None
        line, start = start, reader.line_num + 1
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(columns):
            raise DataError(path, line, f"expected {len(columns)} columns, found {len(cells)}")
        row = {name: cells[i] for name, i in position.items()}
        items.append(_item(row, path, line, urls))
    warnings = []
    transcripts = _transcripts(path.parent / TRANSCRIPT_FILE)
    if transcripts:
        for index, item in enumerate(items):
            text = transcripts.get(_video_key(item.meta["video_id"]))
            if text:
                items[index] = item.model_copy(update={"transcript": text})
    no_url = sorted({i.meta["video_id"] for i in items if not i.meta["video_url"]})
    if no_url:
        count = sum(1 for i in items if not i.meta["video_url"])
        warnings.append(f"{len(no_url)} EC-Bench videos have no video_url ({count} queries): they cannot be downloaded")
    return LoadResult(items=items, warnings=warnings)


TRANSCRIPT_FILE = "transcript.csv"


def _video_key(video_id: str) -> str:
    """'1.0' and '1' name the same video (transcript.csv writes ids as floats)."""
    text = video_id.strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else text


def _transcripts(path: Path) -> dict[str, str]:
    """video id -> timestamped transcript text, from the release's transcript.csv (absent: {})."""
    if not path.exists():
        return {}
    csv.field_size_limit(TRANSCRIPT_LINE_MAX_BYTES)  # one video's transcript is one cell
    out: dict[str, str] = {}
    lines = iter_lines(path, what="transcript file", max_line_bytes=TRANSCRIPT_LINE_MAX_BYTES)
    reader = csv.DictReader(line for _, line in lines)
    fields = reader.fieldnames or []
    if "video_id" not in fields or not ({"timestamped_text", "text"} & set(fields)):
        raise DataError(path, 1, "transcript.csv needs columns video_id and timestamped_text (or text)")
    try:
        for row in reader:
            text = (row.get("timestamped_text") or row.get("text") or "").strip()
            if row.get("video_id") and text:
                out[_video_key(row["video_id"])] = text + "\n"
    except csv.Error as exc:
        raise DataError(path, reader.line_num, f"not valid CSV ({exc})") from None
    return out


def _item(row: dict[str, str], path: Path, line: int, urls: dict[str, str]) -> Item:
    for name in ("question_id", "video_id", "question", "answer", "question_type"):
        if not row[name].strip():
            raise DataError(path, line, f"empty '{name}'")
    task = row["task_type"].strip()
    if task not in TASKS:
        raise DataError(path, line, f"task_type must be Counting or Enumeration, got {task!r}")
    video_id = row["video_id"].strip()
    url = row.get("video_url", "").strip()
    if url:
        urls.setdefault(video_id, url)
    url = urls.get(video_id, url)
    spans = parse_clips(row.get("clips", ""))
    raw_genre = row.get("video_type", "").strip()
    genre = GENRE_ALIASES.get(raw_genre.lower(), raw_genre.lower())
    answer = row["answer"].strip()
    video = (row.get("video_path") or row.get("video") or "").strip() or f"{video_id}.mp4"
    labels = {"question_type": row["question_type"].strip(), "task_type": task, "video_type": genre}
    return Item(
        id=row["question_id"].strip(),
        benchmark="ecbench",
        video=video,
        question=row["question"].strip(),
        answer_type="number" if task == "Counting" else "set",
        target=answer,
        queries=[Query(index=0, time=None, target=answer)],
        evidence=[Span(start=float(s), end=float(e)) for s, e in spans],
        labels=labels,
        meta={
            "video_id": video_id,
            "video_url": url,
            "video_type_raw": raw_genre,
            "clips": row.get("clips", ""),
            "answer_raw": row["answer"],
            "count_details": row.get("count_details", ""),
            "line": line,
        },
    )
