"""Ground-truth tracks as a TrackLog: the programs' input with a perfect detector and tracker.

Lets the tests check each tracking program's logic apart from the detector: boxes and
ids come from the suite's `<family>/gt/<stem>.tracks.jsonl`, features are measured on
the real decoded frames exactly as `run_tracking` does.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2

from statebox.tracker.runtime.features import FEATURES
from statebox.tracker.runtime.tracklog import FrameTracks, TrackedObject, TrackLog


def gt_tracklog(family_dir: Path, stem: str, names: list[str], features: dict[str, set[str]] | None = None,
                min_visible: float = 0.25, until: float | None = None) -> TrackLog:
    family_dir = Path(family_dir)
    meta = json.loads((family_dir / "gt" / f"{stem}.meta.json").read_text())
    rows_by_frame: dict[int, list[dict]] = {}
    for line in (family_dir / "gt" / f"{stem}.tracks.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows_by_frame.setdefault(row["frame"], []).append(row)
    cap = cv2.VideoCapture(str(family_dir / "videos" / meta["video"]))
    frames, index = [], 0
    while True:
        ok, image = cap.read()
        if not ok:
            break
        t = round(index / meta["fps"], 4)
        if until is not None and t >= until:
            break
        objects = []
        for row in rows_by_frame.get(index, []):
            if row["box"] is None or row["visible"] < min_visible:
                continue
            obj = TrackedObject(row["id"], row["class"], tuple(float(v) for v in row["box"]), 1.0)
            for name, classes in (features or {}).items():
                if obj.cls in classes:
                    obj.extra[name] = FEATURES[name](image, obj.xyxy)
            objects.append(obj)
        frames.append(FrameTracks(index, t, objects, len(objects)))
        index += 1
    cap.release()
    return TrackLog(frames, float(meta["fps"]), int(meta["width"]), int(meta["height"]), 1, list(names))
