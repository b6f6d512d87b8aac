"""Detections keyed by the decoded frame's pixels: a frame seen before is not detected again.

A run's streaming queries each get their own copy of a video, cut at the query time and
re-encoded; the frames before the cut's last second decode to the same pixels in every
copy (x264's look-ahead only touches the last few frames), and the detector's output for a
frame depends only on its pixels and the settings. So a frame's detections are stored
under a hash of its pixels (`frame_key`), and a later query of the same video (in the same
container: streams of a group advance in step; or a later container: the host hands the
entries back, see statebox/tracker/detection_cache.py) reuses them. ByteTrack and the
appearance features still run on every frame, so a query's tracks and answer are those of
a run that detected every frame itself (tested: byte-identical tracks and answer).

Rows are JSON lines `{"key", "t", "xyxy", "conf", "cls"}`: float32 values written as the
doubles they equal, so reading them back gives the same float32 arrays bit for bit.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Callable

import numpy as np

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]  # (xyxy float32 (n, 4), confidence float32 (n,), class int32 (n,))
KEY_HEX = 32  # blake2b digest size 16


def frame_key(image: np.ndarray) -> str:
    """A hash of one decoded frame: its shape, dtype and every pixel."""
    h = hashlib.blake2b(digest_size=KEY_HEX // 2)
    h.update(repr((image.shape, str(image.dtype))).encode())
    h.update(np.ascontiguousarray(image).data)
    return h.hexdigest()


def to_row(key: str, t: float, arrays: Arrays) -> dict:
    xyxy, conf, cls = arrays
    return {"key": key, "t": t, "xyxy": xyxy.astype(np.float64).tolist(), "conf": conf.astype(np.float64).tolist(),
            "cls": cls.astype(np.int64).tolist()}


def from_row(row: dict) -> Arrays | None:
    """The arrays of a row, or None when the row is not a well-formed one (the file may come from anywhere)."""
    try:
        xyxy = np.asarray(row["xyxy"], dtype=np.float32).reshape(-1, 4)
        conf = np.asarray(row["conf"], dtype=np.float32).reshape(-1)
        cls = np.asarray(row["cls"], dtype=np.int32).reshape(-1)
    except (KeyError, TypeError, ValueError):
        return None
    if not (len(xyxy) == len(conf) == len(cls)) or not np.isfinite(xyxy).all() or not np.isfinite(conf).all():
        return None
    return xyxy, conf, cls


class DetectionCache:
    """Frame key -> detections, filled from rows files and by the detector; `hits`/`misses` count lookups."""

    def __init__(self) -> None:
        self._rows: dict[str, Arrays] = {}
        self.hits = 0
        self.misses = 0

    def load(self, path: Path) -> int:
        """Add the well-formed rows of a JSON-lines file (absent: none); returns how many were added."""
        path = Path(path)
        if not path.is_file():
            return 0
        added = 0
        with path.open() as handle:
            for line in handle:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                key = row.get("key") if isinstance(row, dict) else None
                if not isinstance(key, str) or len(key) != KEY_HEX or key in self._rows:
                    continue
                arrays = from_row(row)
                if arrays is not None:
                    self._rows[key] = arrays
                    added += 1
        return added

    def detect(self, images: list[np.ndarray], detect_arrays: Callable[[list[np.ndarray]], list[Arrays]]
               ) -> tuple[list[str], list[Arrays]]:
        """(key, arrays) per image: cached ones as stored, the others from ONE `detect_arrays` call over
        the distinct frames not seen before (identical frames of several streams are detected once)."""
        keys = [frame_key(im) for im in images]
        todo: dict[str, int] = {}
        for i, key in enumerate(keys):
            if key in self._rows:
                self.hits += 1
            elif key not in todo:
                todo[key] = i
                self.misses += 1
            else:
                self.hits += 1  # the same frame twice in this batch (two streams of one video)
        if todo:
            for key, arrays in zip(todo, detect_arrays([images[i] for i in todo.values()])):
                self._rows[key] = arrays
        return keys, [_copy(self._rows[key]) for key in keys]


def _copy(arrays: Arrays) -> Arrays:
    """Fresh arrays for each use: a tracker may not change what another stream reads later."""
    return arrays[0].copy(), arrays[1].copy(), arrays[2].copy()


def write_rows(path: Path, rows: list[dict]) -> None:
    with Path(path).open("w") as handle:
        for row in rows:
            if math.isfinite(row["t"]):
                handle.write(json.dumps(row) + "\n")
