"""Decode video frames in their own thread, ahead of the detector.

Decoding and inference then overlap: while the detector works on batch k (in torch's
native threads, which release the GIL), this thread already decodes batch k+1. Frames
skipped by `stride` are only grabbed (demuxed and decoded but never converted to a
numpy image), the cheapest way OpenCV has to move forward.

`opencv_batches` is the one loop that turns a video into batches: the thread reader here
and the process reader (`decode_process.py`) both run it, so they hand out the same frames
byte for byte. The other decoders and the choice between them: `decoders.open_reader`.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import cv2
import numpy as np


@dataclass
class FrameBatch:
    indices: list[int] = field(default_factory=list)  # frame numbers in the video
    times: list[float] = field(default_factory=list)  # seconds
    images: list[np.ndarray] = field(default_factory=list)  # BGR uint8 (h, w, 3), as OpenCV decodes


@dataclass
class VideoInfo:
    fps: float
    frame_count: int
    width: int
    height: int


@dataclass
class Counts:
    """What a decoder has done so far, updated as it goes (read by progress reports)."""

    read: int = 0  # frames decoded to images (the ones the detector sees)
    grabbed: int = 0  # every frame the decoder moved past


class CountedReader:
    """The read counts every reader reports (`decoders.Reader`), from the `Counts` its decoder updates."""

    counts: Counts

    @property
    def frames_read(self) -> int:
        return self.counts.read

    @property
    def frames_grabbed(self) -> int:
        return self.counts.grabbed


class DecodeError(RuntimeError):
    """A decoder failed while reading a video (the message names the video and the cause)."""


def probe(path: Path) -> VideoInfo:
    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        raise ValueError(f"{path}: cannot be opened as a video")
    try:
        fps = cap.get(cv2.CAP_PROP_FPS) or 0.0
        return VideoInfo(
            fps=fps if fps > 0 else 30.0,
            frame_count=int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0),
            width=int(cap.get(cv2.CAP_PROP_FRAME_WIDTH) or 0),
            height=int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT) or 0),
        )
    finally:
        cap.release()


def frame_time(index: int, fps: float) -> float:
    """A frame's time as every decoder reports it (so decoders agree on times, not just frames)."""
    return round(index / fps, 4)


def opencv_batches(path: Path, fps: float, stride: int, batch: int, counts: Counts,
                   stop: threading.Event | None = None) -> Iterator[FrameBatch]:
    """Batches of every `stride`-th frame of `path`, decoded by OpenCV; `counts` follows along.

    The last batch may be short. Stops early (between frames) once `stop` is set."""
    cap = cv2.VideoCapture(str(path))
    try:
        index = 0
        current = FrameBatch()
        while stop is None or not stop.is_set():
            if index % stride == 0:
                ok, image = cap.read()
                if not ok:
                    break
                current.indices.append(index)
                current.times.append(frame_time(index, fps))
                current.images.append(image)
                counts.read += 1
                if len(current.images) == batch:
                    counts.grabbed += 1
                    index += 1
                    yield current
                    current = FrameBatch()
                    continue
            elif not cap.grab():
                break
            counts.grabbed += 1
            index += 1
        if current.images:
            yield current
    finally:
        cap.release()


class FrameReader(CountedReader):
    """Iterate over `FrameBatch`es of every `stride`-th frame, decoded by a background thread.

    Subclasses change where batches come from (`_batches`), not the hand-over: a bounded
    queue of `prefetch` batches, an exception in the thread re-raised in the consumer, and
    `close()` that stops the thread wherever it is."""

    kind = "thread"
    fallback: str | None = None  # set by decoders.open_reader when this reader replaced the one asked for
    _DONE = object()

    def __init__(self, path: Path, *, stride: int = 1, batch: int = 8, prefetch: int = 4) -> None:
        if stride < 1 or batch < 1:
            raise ValueError("stride and batch must be >= 1")
        self.path = Path(path)
        self.info = probe(self.path)
        self.stride = stride
        self.batch = batch
        self.counts = Counts()
        self._queue: queue.Queue = queue.Queue(maxsize=prefetch)
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sbtracker-decode", daemon=True)
        self._thread.start()

    def _batches(self) -> Iterator[FrameBatch]:
        return opencv_batches(self.path, self.info.fps, self.stride, self.batch, self.counts, self._stop)

    def _run(self) -> None:
        try:
            for fb in self._batches():
                if self._stop.is_set():
                    break
                self._queue.put(fb)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            self._error = exc
        finally:
            self._queue.put(self._DONE)

    def __iter__(self) -> Iterator[FrameBatch]:
        while True:
            item = self._queue.get()
            if item is self._DONE:
                if self._error is not None:
                    raise self._error
                return
            yield item

    def close(self) -> None:
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._queue.get_nowait()
            except queue.Empty:
                self._thread.join(timeout=0.05)
