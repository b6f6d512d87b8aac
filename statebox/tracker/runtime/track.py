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
from typing import Callable, Sequence, TextIO

import numpy as np

from .decoders import Reader, open_reader
from .detcache import DetectionCache, to_row
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
    decoder: str = ""  # the decoder that read the stream (decoders.DECODERS)
    decoder_fallback: str | None = None  # why the requested decoder was replaced, if it was

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
    decoder: str = "auto",
) -> tuple[TrackLog, RunStats]:
    """One video: `run_tracking_many` with a single stream (the same code path, so the same tracks)."""
    (log, stats), = run_tracking_many([Path(video)], detector, stride=stride, batch=batch,
                                      tracker_config=tracker_config, features=[features or {}],
                                      sinks=[sink], on_batch=on_batch, decoder=decoder)
    return log, stats


@dataclass
class _Stream:
    video: Path
    reader: Reader
    tracker: ObjectTracker
    wanted: list
    sink: TextIO | None
    frames: list[FrameTracks]
    stats: RunStats


def run_tracking_many(
    videos: list[Path],
    detector: Detector,
    *,
    stride: int = 1,
    batch: int = 8,
    tracker_config: TrackerConfig | None = None,
    features: list[dict[str, set[str]]] | None = None,
    sinks: Sequence[TextIO | None] | None = None,
    on_batch: Callable[[RunStats], None] | None = None,
    decoder: str = "auto",
    cache: DetectionCache | None = None,
    cache_rows: list[list[dict]] | None = None,
) -> list[tuple[TrackLog, RunStats]]:
    """Many videos through one detector: decode (one reader per stream) -> detect (the next batches of
    every stream in one forward pass) -> track (one ByteTrack state per stream), in frame order per stream.

    Each step takes the next `batch` frames of every stream that still has frames, so one
    forward pass holds up to `len(videos) * batch` frames; detection of step k+1 (torch's
    own threads or the GPU, outside the GIL) overlaps tracking of step k. A stream's
    detections do not depend on its neighbours (each frame size is letterboxed on its own,
    see `Detector.detect_arrays`) and its tracker sees only its own frames in order, so a
    stream's log is the one a single-stream run of that video gives (tested).
    `features[i]` maps a feature name (features.FEATURES) to the classes it is measured on
    for stream i; `sinks[i]` gets stream i's frames as JSON lines as they are tracked.
    `on_batch` gets the aggregate stats after every step. `decoder` picks each stream's
    decoder (`decoders.open_reader`: thread, process, torchcodec or auto; the one used and
    any fallback reason land in the stream's stats). Returns (log, stats) per stream;
    every stream's `wall_s` is the whole run's.
    `cache` (detcache.py): a frame whose pixels it holds is not detected again, and identical
    frames of several streams in one step are detected once; `cache_rows[i]` then gets stream
    i's rows (frame key, time, detections) for every frame it tracked, for later runs. Only on
    the detector's array path (`Detector.cacheable`); elsewhere every frame is detected.
    """
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    from .features import FEATURES

    videos = [Path(v) for v in videos]
    features = features if features is not None else [{} for _ in videos]
    sinks = sinks if sinks is not None else [None for _ in videos]
    cache = cache if cache is not None and detector.cacheable else None
    rows_out = cache_rows if cache is not None and cache_rows is not None else [None for _ in videos]
    if not (len(features) == len(sinks) == len(rows_out) == len(videos)) or not videos:
        raise ValueError("one features map and one sink per video, and at least one video")
    started = time.perf_counter()
    detector.claim_threads()
    streams: list[_Stream] = []
    total = RunStats()
    pool = ThreadPoolExecutor(max_workers=max(1, detector.workers), thread_name_prefix="sbtracker-detect")
    try:
        for video, feats, sink in zip(videos, features, sinks):
            reader = open_reader(video, stride=stride, batch=batch, decoder=decoder, device=detector.device)
            tracker = ObjectTracker(detector.names, reader.info.fps / stride, tracker_config or TrackerConfig())
            wanted = [(FEATURES[name], name, classes) for name, classes in (feats or {}).items()]
            streams.append(_Stream(video, reader, tracker, wanted, sink, [],
                                   RunStats(decoder=reader.kind, decoder_fallback=reader.fallback)))

        def detect(images: list) -> tuple[list[str] | None, list]:
            """(frame keys or None, detections) of one step's images, through the cache when there is one."""
            if cache is None:
                return None, detector.detect(images)
            keys, arrays = cache.detect(images, detector.detect_arrays)
            return keys, [detector.wrap(a) for a in arrays]

        def steps():
            """[(stream, FrameBatch)] per step: the next batch of every stream that has one."""
            iters = {i: iter(s.reader) for i, s in enumerate(streams)}
            while iters:
                step = []
                for i in list(iters):
                    fb = next(iters[i], None)
                    if fb is None:
                        del iters[i]
                    else:
                        step.append((streams[i], fb))
                if step:
                    yield step

        def detected():
            """(step, detections) in order, the next step's detection already running while one is tracked."""
            pending: deque = deque()
            for step in steps():
                images = [im for _, fb in step for im in fb.images]
                pending.append((step, pool.submit(detect, images)))
                if len(pending) > max(1, detector.workers):
                    yield pending[0][0], pending.popleft()[1].result()
            while pending:
                yield pending[0][0], pending.popleft()[1].result()

        t0 = time.perf_counter()
        for step, (keys, dets) in detected():
            t1 = time.perf_counter()
            k = 0
            for st, fb in step:
                rows = rows_out[streams.index(st)]
                for index, t, image in zip(fb.indices, fb.times, fb.images):
                    det = dets[k]
                    if rows is not None and keys is not None:
                        rows.append(to_row(keys[k], t, (det.xyxy, det.confidence, det.class_id)))
                    k += 1
                    ft = FrameTracks(index, t, st.tracker.update(det), detections=len(det))
                    for fn, name, classes in st.wanted:
                        for obj in ft.objects:
                            if obj.cls in classes:
                                obj.extra[name] = fn(image, obj.xyxy)
                    st.frames.append(ft)
                    if st.sink is not None:
                        st.sink.write(json.dumps(ft.to_json()) + "\n")
                st.stats.batches += 1
            total.detect_s += t1 - t0  # waiting for detections (decode + inference not hidden by overlap)
            t0 = time.perf_counter()
            total.track_s += t0 - t1
            total.batches += 1
            total.frames_read = sum(len(s.frames) for s in streams)
            total.frames_grabbed = sum(s.reader.frames_grabbed for s in streams)
            total.wall_s = time.perf_counter() - started
            if on_batch is not None:
                on_batch(total)
    finally:
        for st in streams:
            st.reader.close()
        pool.shutdown(wait=True, cancel_futures=True)
    wall = time.perf_counter() - started
    out = []
    for st in streams:
        if st.sink is not None:
            st.sink.flush()
        info = st.reader.info
        st.stats.frames_read = len(st.frames)
        st.stats.frames_grabbed = st.reader.frames_grabbed
        st.stats.detect_s, st.stats.track_s, st.stats.wall_s = total.detect_s, total.track_s, wall
        out.append((TrackLog(st.frames, info.fps, info.width, info.height, stride, list(detector.names.values())),
                    st.stats))
    return out
