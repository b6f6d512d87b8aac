"""What the EC-Bench-format families share: evidence spans and the dataset.csv writer."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

COLUMNS = ("video_url", "video_id", "video_type", "question_id", "question_type", "task_type", "question", "clips",
           "answer", "count_details", "video_path")


def hms(seconds: int) -> str:
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def span(start_s: float, end_s: float) -> tuple[int, int]:
    """An event's evidence span in whole seconds (EC-Bench clips are h:mm:ss): floor(start), ceil(end)."""
    a = int(math.floor(start_s + 1e-9))
    b = int(math.ceil(end_s - 1e-9))
    return a, max(b, a + 1)


def clips_text(spans: list[tuple[int, int]]) -> str:
    return ", ".join(f"[{hms(a)},{hms(b)}]" for a, b in sorted(spans))


def row(video_id: str, video: str, question_id: str, question_type: str, question: str, answer: Any,
        spans: list[tuple[int, int]], details: str = "", task_type: str = "Counting") -> dict[str, str]:
    return {"video_url": "", "video_id": video_id, "video_type": "synthetic", "question_id": question_id,
            "question_type": question_type, "task_type": task_type, "question": question, "clips": clips_text(spans),
            "answer": str(answer), "count_details": details, "video_path": video}


def annotation_text(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow(r)
    return out.getvalue()
