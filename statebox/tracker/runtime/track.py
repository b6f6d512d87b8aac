"""Detection + ByteTrack over a whole video: the tracks every program reads.

ByteTrack comes from Roboflow's `trackers` package (supervision 0.31 dropped
`sv.ByteTrack`). It runs class-agnostic (as ultralytics' own ByteTrack does) over
class-agnostic NMS detections, so one object is one track even when the detector's class
for it flickers; each track's class is decided by vote (see `ObjectTracker`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TextIO

import numpy as np

from .decode import FrameReader
from .detect import Detector
from .tracklog import FrameTracks, TrackedObject, TrackLog


@dataclass
class TrackerConfig:
    """ByteTrack thresholds, matched to ultralytics' own bytetrack.yaml (new tracks and the
    first association stage from confidence 0.25, the second stage down to the detector's
    0.1), so the two trackers compared in perf/ see the same detections the same way."""

    track_activation_threshold: float = 0.25
    lost_track_buffer: int = 30
    minimum_consecutive_frames: int = 2
    minimum_iou_threshold: float = 0.1
    high_conf_det_threshold: float = 0.25


@dataclass
class RunStats:
    frames_read: int = 0
    frames_grabbed: int = 0
    batches: int = 0
    detect_s: float = 0.0
    track_s: float = 0.0
    wall_s: float = 0.0

    @property
    def fps(self) -> float:
        return self.frames_read / self.wall_s if self.wall_s else 0.0


class ObjectTracker:
    """One class-agnostic `trackers.ByteTrackTracker`; each object keeps the class its detections vote for.

    A young detector often calls one object a can in one frame and a ball in the next. A
    tracker per class would then cut the object into pieces (a new id each time the class
    flips back); here the track follows the box whatever the class, and programs read
    each track's class as the confidence-weighted majority of its detections so far
    (`TrackLog.majority_class`). The class reported per frame is that frame's detection.
    """

    def __init__(self, names: dict[int, str], frame_rate: float, config: TrackerConfig) -> None:
        from trackers import ByteTrackTracker

        self.names = names
        c = config
        self._tracker = ByteTrackTracker(
            lost_track_buffer=c.lost_track_buffer,
            frame_rate=frame_rate,
            track_activation_threshold=c.track_activation_threshold,
            minimum_consecutive_frames=c.minimum_consecutive_frames,
            minimum_iou_threshold=c.minimum_iou_threshold,
            high_conf_det_threshold=c.high_conf_det_threshold,
        )

    def update(self, detections, frame: np.ndarray | None = None) -> list[TrackedObject]:
        tracked = self._tracker.update(detections)
        out: list[TrackedObject] = []
        if tracked.tracker_id is None:
            return out
        for i, tid in enumerate(tracked.tracker_id):
            if tid is None or int(tid) < 0:
                continue  # not yet confirmed
            cid = int(tracked.class_id[i]) if tracked.class_id is not None else 0
            conf = float(tracked.confidence[i]) if tracked.confidence is not None else 1.0
            x1, y1, x2, y2 = (float(v) for v in tracked.xyxy[i])
            out.append(TrackedObject(int(tid), self.names.get(cid, str(cid)), (x1, y1, x2, y2), conf))
        return out


def run_tracking(
    video: Path,
    detector: Detector,
    *,
    stride: int = 1,
    batch: int = 8,
    tracker_config: TrackerConfig | None = None,
    features: dict[str, set[str]] | None = None,
    sink: TextIO | None = None,
    on_batch: Callable[[RunStats], None] | None = None,
) -> tuple[TrackLog, RunStats]:
    """Decode (own thread) -> detect (batched, up to `detector.workers` batches in flight) -> track, in order.

    Each frame's tracks go to `sink` as they arrive. `features` maps a feature name
    (features.FEATURES) to the classes it is measured on. Tracking consumes detections in
    frame order, so the output is the same as a one-frame-at-a-time run (tested).
    """
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    from .features import FEATURES

    wanted = [(FEATURES[name], name, classes) for name, classes in (features or {}).items()]
    started = time.perf_counter()
    detector.claim_threads()
    reader = FrameReader(video, stride=stride, batch=batch)
    info = reader.info
    tracker = ObjectTracker(detector.names, info.fps / stride, tracker_config or TrackerConfig())
    stats = RunStats()
    frames: list[FrameTracks] = []
    pool = ThreadPoolExecutor(max_workers=detector.workers, thread_name_prefix="sbtracker-detect")

    def detected():
        """(batch, detections) in decode order, with up to `workers` batches being detected at once."""
        pending: deque = deque()
        for fb in reader:
            pending.append((fb, pool.submit(detector.detect, fb.images)))
            if len(pending) >= detector.workers:
                fb0, fut = pending.popleft()
                yield fb0, fut.result()
        while pending:
            fb0, fut = pending.popleft()
            yield fb0, fut.result()

    try:
        t0 = time.perf_counter()
        for fb, dets in detected():
            t1 = time.perf_counter()
            for index, t, det, image in zip(fb.indices, fb.times, dets, fb.images):
                ft = FrameTracks(index, t, tracker.update(det), detections=len(det))
                for fn, name, classes in wanted:
                    for obj in ft.objects:
                        if obj.cls in classes:
                            obj.extra[name] = fn(image, obj.xyxy)
                frames.append(ft)
                if sink is not None:
                    sink.write(json.dumps(ft.to_json()) + "\n")
            stats.detect_s += t1 - t0  # waiting for detections (decode + inference not hidden by overlap)
            t0 = time.perf_counter()
            stats.track_s += t0 - t1
            stats.batches += 1
            stats.frames_read = reader.frames_read
            stats.frames_grabbed = reader.frames_grabbed
            stats.wall_s = time.perf_counter() - started
            if on_batch is not None:
                on_batch(stats)
    finally:
        reader.close()
        pool.shutdown(wait=True, cancel_futures=True)
    if sink is not None:
        sink.flush()
    stats.frames_read = len(frames)
    stats.frames_grabbed = reader.frames_grabbed
    stats.wall_s = time.perf_counter() - started
    return TrackLog(frames, info.fps, info.width, info.height, stride, list(detector.names.values())), stats
