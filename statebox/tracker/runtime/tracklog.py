"""The tracks a run produces, as plain data: what every tracking program reads.

Kept free of torch/ultralytics/OpenCV so the programs (and their tests) run anywhere;
`tracks.jsonl` (one `FrameTracks` per line) round-trips through `load_tracklog`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class TrackedObject:
    id: int
    cls: str
    xyxy: tuple[float, float, float, float]
    conf: float
    extra: dict = field(default_factory=dict)  # features measured on the crop (see features.py)

    @property
    def center(self) -> tuple[float, float]:
        x1, y1, x2, y2 = self.xyxy
        return ((x1 + x2) / 2, (y1 + y2) / 2)

    def to_json(self) -> dict:
        row = {"id": self.id, "cls": self.cls, "xyxy": [round(v, 1) for v in self.xyxy], "conf": round(self.conf, 3)}
        if self.extra:
            row["extra"] = self.extra
        return row


@dataclass
class FrameTracks:
    frame: int
    t: float
    objects: list[TrackedObject] = field(default_factory=list)
    detections: int = 0  # raw detections before tracking (confirmed tracks are `objects`)

    def to_json(self) -> dict:
        return {"frame": self.frame, "t": self.t, "detections": self.detections,
                "objects": [o.to_json() for o in self.objects]}


@dataclass
class Track:
    """One track id through the video: every frame it was seen in, in order."""

    id: int
    cls: str
    times: list[float] = field(default_factory=list)
    boxes: list[tuple[float, float, float, float]] = field(default_factory=list)
    extras: list[dict] = field(default_factory=list)

    @property
    def first(self) -> float:
        return self.times[0]

    @property
    def last(self) -> float:
        return self.times[-1]

    def center(self, i: int) -> tuple[float, float]:
        x1, y1, x2, y2 = self.boxes[i]
        return ((x1 + x2) / 2, (y1 + y2) / 2)


@dataclass
class TrackLog:
    """Every processed frame's confirmed tracks, plus the video's geometry and timing."""

    frames: list[FrameTracks]
    fps: float
    width: int
    height: int
    stride: int = 1
    names: list[str] = field(default_factory=list)  # every class the detector knows (not only those seen)

    @property
    def duration(self) -> float:
        return self.frames[-1].t if self.frames else 0.0

    @property
    def step(self) -> float:
        """Seconds between processed frames."""
        return self.stride / self.fps if self.fps else 0.0

    def majority_class(self) -> dict[int, str]:
        """Each track id's class: the confidence-weighted vote of its detections in these frames.

        Computed over the frames this log holds, so a log cut at a query time never uses a
        later frame's vote.
        """
        votes: dict[int, dict[str, float]] = {}
        for f in self.frames:
            for o in f.objects:
                v = votes.setdefault(o.id, {})
                v[o.cls] = v.get(o.cls, 0.0) + max(o.conf, 1e-3)
        return {tid: max(v.items(), key=lambda kv: kv[1])[0] for tid, v in votes.items()}

    def count_in_frame(self, frame: FrameTracks, cls: str, majority: dict[int, str] | None = None) -> int:
        majority = majority if majority is not None else self.majority_class()
        return sum(1 for o in frame.objects if majority.get(o.id, o.cls) == cls)

    def tracks(self, cls: str | None = None) -> dict[int, Track]:
        """Tracks by id (of class `cls` by majority vote, when given), each with every frame it was seen in."""
        majority = self.majority_class()
        out: dict[int, Track] = {}
        for f in self.frames:
            for o in f.objects:
                tcls = majority.get(o.id, o.cls)
                if cls is not None and tcls != cls:
                    continue
                tr = out.setdefault(o.id, Track(o.id, tcls))
                tr.times.append(f.t)
                tr.boxes.append(o.xyxy)
                tr.extras.append(o.extra)
        return out


def load_tracklog(path: Path, fps: float, width: int, height: int, stride: int = 1,
                  names: list[str] | None = None) -> TrackLog:
    """Read a `tracks.jsonl` written by a run back into a `TrackLog`."""
    frames = []
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        objects = [TrackedObject(int(o["id"]), str(o["cls"]), tuple(o["xyxy"]), float(o.get("conf", 1.0)),
                                  dict(o.get("extra") or {}))
                   for o in row.get("objects", [])]
        frames.append(FrameTracks(int(row["frame"]), float(row["t"]), objects, int(row.get("detections", 0))))
    return TrackLog(frames, fps, width, height, stride, list(names or []))
