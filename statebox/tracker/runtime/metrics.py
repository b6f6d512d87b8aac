"""Tracking accuracy against exact per-frame truth: HOTA, IDF1 and MOTA from the `trackeval` package.

Why trackeval and not own code: it is the reference implementation of HOTA (Luiten et
al.) and of the CLEAR MOT and identity metrics that MOT benchmarks publish, so numbers
here mean what they mean elsewhere. It is fed directly, without its file-format readers:
per frame, the truth ids, the tracker ids and their IoU matrix (the `data` dict every
trackeval metric's `eval_sequence` takes), evaluated class-agnostically (every object is
"an object"; a track's class is the programs' business, not the tracker's).

Truth: the synthetic generator's `<family>/gt/<stem>.tracks.jsonl` (one row per object
per frame: `frame`, `id`, `box` = the visible-pixel box or null, `visible` fraction).
Objects less than `min_visible` visible are left out of the truth, as they are of the
training labels (statebox/tracker/export.py). Only frames the tracker processed are
evaluated (a `stride` run, or a video cut at a query time, is judged on its own frames).

Plain data in, plain data out (numpy only, trackeval imported where used): the runtime's
bench, the perf script and `statebox tracker eval` on the host all call it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

Boxes = dict[int, list[tuple[int, tuple[float, float, float, float]]]]  # frame -> [(id, xyxy)]
MIN_VISIBLE = 0.25


def load_truth(path: Path, min_visible: float = MIN_VISIBLE) -> Boxes:
    """frame -> [(object id, visible xyxy)] from a generator truth file."""
    out: Boxes = {}
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("box") is None or float(row.get("visible", 1.0)) < min_visible:
            continue
        out.setdefault(int(row["frame"]), []).append((int(row["id"]), _box(row["box"])))
    return out


def boxes_from_frames(frames: list[dict]) -> Boxes:
    """frame -> [(track id, xyxy)] from `FrameTracks.to_json()` rows (a tracks.jsonl)."""
    return {int(f["frame"]): [(int(o["id"]), _box(o["xyxy"])) for o in f.get("objects", [])] for f in frames}


def _box(values: list) -> tuple[float, float, float, float]:
    x1, y1, x2, y2 = (float(v) for v in values)
    return x1, y1, x2, y2


def load_tracks_jsonl(path: Path) -> tuple[list[int], Boxes]:
    """(processed frame numbers, boxes) from a run's tracks.jsonl."""
    frames = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return [int(f["frame"]) for f in frames], boxes_from_frames(frames)


def _ious(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    from trackeval.datasets._base_dataset import _BaseDataset

    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    return _BaseDataset._calculate_box_ious(a, b, box_format="x0y0x1y1")


def sequence_data(truth: Boxes, pred: Boxes, frames: list[int]) -> dict:
    """The `data` dict trackeval's metrics evaluate: ids remapped to 0..n-1, IoU per frame."""
    gt_map = {i: k for k, i in enumerate(sorted({i for f in frames for i, _ in truth.get(f, [])}))}
    tr_map = {i: k for k, i in enumerate(sorted({i for f in frames for i, _ in pred.get(f, [])}))}
    data: dict = {"num_timesteps": len(frames), "num_gt_ids": len(gt_map), "num_tracker_ids": len(tr_map),
                  "gt_ids": [], "tracker_ids": [], "similarity_scores": [], "num_gt_dets": 0, "num_tracker_dets": 0}
    for f in frames:
        g, t = truth.get(f, []), pred.get(f, [])
        data["gt_ids"].append(np.array([gt_map[i] for i, _ in g], dtype=int))
        data["tracker_ids"].append(np.array([tr_map[i] for i, _ in t], dtype=int))
        ga = np.array([b for _, b in g], dtype=float).reshape(-1, 4)
        ta = np.array([b for _, b in t], dtype=float).reshape(-1, 4)
        data["similarity_scores"].append(_ious(ga, ta))
        data["num_gt_dets"] += len(g)
        data["num_tracker_dets"] += len(t)
    return data


def tracking_metrics(truth: Boxes, pred: Boxes, frames: list[int]) -> dict[str, float]:
    """HOTA (mean over trackeval's IoU thresholds), DetA, AssA, IDF1, MOTA, ID switches, and id counts."""
    from trackeval.metrics import CLEAR, HOTA, Identity

    data = sequence_data(truth, pred, sorted(frames))
    quiet = {"PRINT_CONFIG": False}
    hota = HOTA(quiet).eval_sequence(data)
    ident = Identity(quiet).eval_sequence(data)
    clear = CLEAR(quiet).eval_sequence(data)
    return {"HOTA": round(float(np.mean(hota["HOTA"])), 4), "DetA": round(float(np.mean(hota["DetA"])), 4),
            "AssA": round(float(np.mean(hota["AssA"])), 4), "IDF1": round(float(ident["IDF1"]), 4),
            "MOTA": round(float(clear["MOTA"]), 4), "IDSW": int(clear["IDSW"]),
            "gt_ids": data["num_gt_ids"], "tracker_ids": data["num_tracker_ids"], "frames": len(frames)}


def combine(per_video: list[dict]) -> dict[str, float]:
    """Suite-level figures: each metric averaged over videos weighted by their truth detections' frames
    (a plain mean per video would let a 3-frame clip count as much as a 300-frame one)."""
    if not per_video:
        return {}
    weights = np.array([max(1, m.get("frames", 1)) for m in per_video], dtype=float)
    out = {k: round(float(np.average([m[k] for m in per_video], weights=weights)), 4)
           for k in ("HOTA", "DetA", "AssA", "IDF1", "MOTA")}
    out["IDSW"] = int(sum(m["IDSW"] for m in per_video))
    out["videos"] = len(per_video)
    return out
