"""Decode video frames in their own thread, ahead of the detector.

Decoding and inference then overlap: while the detector works on batch k (in torch's
native threads, which release the GIL), this thread already decodes batch k+1. Frames
skipped by `stride` are only grabbed (demuxed and decoded but never converted to a
numpy image), the cheapest way OpenCV has to move forward.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np


@dataclass
class FrameBatch:
    indices: list[int] = field(default_factory=list)  # frame numbers in the video
    times: list[float] = field(default_factory=list)  # seconds
    images: list[np.ndarray] = field(default_factory=list)  # BGR, as OpenCV decodes


@dataclass
class VideoInfo:
    fps: float
    frame_count: int
    width: int
    height: int


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


class FrameReader:
    """Iterate over `FrameBatch`es of every `stride`-th frame, decoded by a background thread."""

    _DONE = object()

    def __init__(self, path: Path, *, stride: int = 1, batch: int = 8, prefetch: int = 4) -> None:
        if stride < 1 or batch < 1:
            raise ValueError("stride and batch must be >= 1")
        self.path = Path(path)
        self.info = probe(self.path)
        self.stride = stride
        self.batch = batch
        self.frames_read = 0  # frames decoded to images (the ones the detector sees)
        self.frames_grabbed = 0  # every frame the decoder moved past
        self._queue: queue.Queue = queue.Queue(maxsize=prefetch)
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sbtracker-decode", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        cap = cv2.VideoCapture(str(self.path))
        try:
            fps = self.info.fps
            index = 0
            current = FrameBatch()
            while not self._stop.is_set():
                if index % self.stride == 0:
                    ok, image = cap.read()
                    if not ok:
                        break
                    current.indices.append(index)
                    current.times.append(round(index / fps, 4))
                    current.images.append(image)
                    self.frames_read += 1
                    if len(current.images) == self.batch:
                        self._queue.put(current)
                        current = FrameBatch()
                else:
                    if not cap.grab():
                        break
                self.frames_grabbed += 1
                index += 1
            if current.images:
                self._queue.put(current)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            self._error = exc
        finally:
            cap.release()
            self._queue.put(self._DONE)

    def __iter__(self):
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
