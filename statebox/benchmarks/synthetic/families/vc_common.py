"""What the VCBench-format families share: query-point picking and eval rows.

Conventions (as streaming_count): a query time sits half a frame after frame k
(q = (k + 0.5) / fps), so the cut video ends on frame k and the answer counts what
happened in frames 0..k; a query frame is never within `margin` frames of an event
that changes the answer, so the cut is never ambiguous.
"""

from __future__ import annotations

from typing import Any

from statebox.benchmarks.synthetic.clip import FPS
from statebox.benchmarks.synthetic.families.common import LayoutRejected

SOURCE = "synthetic"


def query_time(frame: int, fps: int = FPS) -> float:
    return round((frame + 0.5) / fps, 2)


def pick_frames(rng, n_frames: int, changes: list[int], *, want: tuple[int, int] = (3, 6), margin: int = 2,
                spacing: int = 10, start: int = 10) -> list[int]:
    """3-6 query frames, `spacing` apart, none within `margin` frames of a change, preferring frames
    just after a change (so consecutive answers differ)."""
    valid = [f for f in range(start, n_frames) if all(abs(f - c) > margin for c in changes)]
    preferred = [f for f in valid if any(margin < f - c <= 12 for c in changes)]
    count = int(rng.integers(want[0], want[1] + 1))
    chosen: list[int] = []
    for pool in (preferred, valid):
        for f in (int(x) for x in rng.permutation(pool)):
            if len(chosen) < count and all(abs(f - c) >= spacing for c in chosen):
                chosen.append(f)
    if len(chosen) < want[0]:
        raise LayoutRejected("too few unambiguous query times")
    return sorted(chosen)


def eval_rows(qid: str, video: str, question: str, subtype: str, frames: list[int], counts: list[int],
              times: list[float] | None = None) -> list[dict[str, Any]]:
    """VCBench eval rows (one per query point) for one question."""
    times = times or [query_time(f) for f in frames]
    return [{"q_id": f"{qid}_{i}", "query_index": i, "id": qid, "source_dataset": SOURCE, "video_path": video,
             "question": question, "counting_type": subtype.split("-")[0], "counting_subtype": subtype,
             "query_time": t, "count": int(c)} for i, (t, c) in enumerate(zip(times, counts))]
