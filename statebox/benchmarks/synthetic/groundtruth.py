"""Per-video ground truth files: what they hold, where they live, how to read them.

Layout, for a video `DIR/<family>/videos/<stem>.mp4`:

- `DIR/<family>/gt/<stem>.tracks.jsonl` — one row per object per frame (`TrackRow`):
  `frame`, `time` (s), `id`, `class`, `box` ([x1, y1, x2, y2) of the object's visible
  pixels, integers, null when no pixel is visible), `amodal_box` (the full silhouette,
  even when hidden or outside the frame), `visible` (visible pixels / full silhouette
  pixels, 0..1, occlusion and frame edges included), `in_frame` (fraction of the
  silhouette inside the image, occlusion ignored), `state` (family-specific facts such as
  a bolt's angle or whether the lamp is on).
- `DIR/<family>/gt/<stem>.events.jsonl` — one row per event (`GtEvent`): `time`, `frame`,
  `kind` (enter, exit, swap, add, remove, tighten, loosen, on, off, reveal, ...), `ids`,
  `data`.
- `DIR/<family>/gt/<stem>.meta.json` — `VideoMeta`: fps, frame count, size, camera, the
  family's scene parameters and the answers.

Rows are written in a fixed order with rounded floats so the same seed gives
byte-identical files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from statebox.errors import DataError


class TrackRow(BaseModel):
    frame: int
    time: float
    id: int
    cls: str = Field(alias="class")
    box: list[int] | None
    amodal_box: list[float] | None
    visible: float
    in_frame: float
    state: dict[str, Any] = Field(default_factory=dict)

    model_config = {"populate_by_name": True}

    def amodal(self) -> list[float]:
        """The full silhouette box, for a reader that places the object (ValueError on a row without one)."""
        if self.amodal_box is None:
            raise ValueError(f"track row of object {self.id} at frame {self.frame} has no amodal box")
        return self.amodal_box


class GtEvent(BaseModel):
    time: float
    frame: int
    kind: str
    ids: list[int] = Field(default_factory=list)
    data: dict[str, Any] = Field(default_factory=dict)


class VideoMeta(BaseModel):
    stem: str
    family: str
    video: str  # relative to the family's videos folder
    fps: int
    n_frames: int
    width: int
    height: int
    duration: float
    params: dict[str, Any] = Field(default_factory=dict)
    answers: dict[str, Any] = Field(default_factory=dict)


def gt_dir(family_dir: Path) -> Path:
    return Path(family_dir) / "gt"


def tracks_path(family_dir: Path, stem: str) -> Path:
    return gt_dir(family_dir) / f"{stem}.tracks.jsonl"


def events_path(family_dir: Path, stem: str) -> Path:
    return gt_dir(family_dir) / f"{stem}.events.jsonl"


def meta_path(family_dir: Path, stem: str) -> Path:
    return gt_dir(family_dir) / f"{stem}.meta.json"


def dumps(obj: Any) -> str:
    """The one JSON spelling used for every generated file (stable key order, no spaces)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".part")
    tmp.write_text("".join(dumps(r) + "\n" for r in rows))
    tmp.replace(path)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    if not path.exists():
        raise DataError(path, None, "ground-truth file is missing")
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise DataError(path, n, f"not JSON ({exc.msg})") from None
    return rows


def read_tracks(family_dir: Path, stem: str) -> list[TrackRow]:
    return [TrackRow.model_validate(r) for r in _read_jsonl(tracks_path(family_dir, stem))]


def read_events(family_dir: Path, stem: str) -> list[GtEvent]:
    return [GtEvent.model_validate(r) for r in _read_jsonl(events_path(family_dir, stem))]


def read_meta(family_dir: Path, stem: str) -> VideoMeta:
    path = meta_path(family_dir, stem)
    if not path.exists():
        raise DataError(path, None, "ground-truth meta file is missing")
    return VideoMeta.model_validate_json(path.read_text())


def frames_of(rows: list[TrackRow]) -> dict[int, list[TrackRow]]:
    """Track rows grouped by frame index."""
    out: dict[int, list[TrackRow]] = {}
    for row in rows:
        out.setdefault(row.frame, []).append(row)
    return out
