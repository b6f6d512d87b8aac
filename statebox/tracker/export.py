"""Export the generated suite's ground truth as a YOLO detection data set.

The suite writes, per video, every object's visible box in every frame
(`<family>/gt/<stem>.tracks.jsonl`, see statebox.benchmarks.synthetic.groundtruth).
Training the baseline's detector on those boxes needs no labelling and no downloads:
every `every`-th frame, plus frames that show each object at least `per_object` times,
becomes a JPEG plus a YOLO label file (`class cx cy w h`, normalised). Whole videos go to the validation split (never frames of one video on
both sides), so the mAP on the card measures unseen layouts.

Only the modal box counts (the pixels you can see): an object hidden under a cup is not
labelled in that frame, which is exactly what a detector can be asked to find.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field

from statebox.errors import DataError, UserError
from statebox.media_input import opencv_capture


class ExportSummary(BaseModel):
    """What went into the data set; copied into the weights card."""

    suite: str
    suite_seed: int | None = None  # from suite.json: the suite can be regenerated exactly
    suite_size: str | None = None
    families: list[str]
    names: dict[int, str]
    videos: dict[str, int] = Field(default_factory=dict)  # split -> videos
    images: dict[str, int] = Field(default_factory=dict)  # split -> images
    boxes: dict[str, int] = Field(default_factory=dict)  # split -> boxes
    every: int = 5
    every_for: dict[str, int] = Field(default_factory=dict)  # per-family overrides of `every`
    per_object: int = 3  # each object labelled in at least this many frames
    min_visible: float = 0.25
    data_yaml: str = "data.yaml"
    suite_digest: str = ""  # hash of the ground-truth files used


@dataclass
class _Video:
    family: str
    stem: str
    video: Path
    tracks: Path
    width: int = 0
    height: int = 0
    rows_by_frame: dict[int, list[dict]] = field(default_factory=dict)


def _discover(suite_dir: Path, families: list[str] | None) -> list[_Video]:
    if not (suite_dir / "suite.json").is_file():
        raise UserError(f"{suite_dir}: not a generated suite (no suite.json); make one with `statebox bench make`")
    found: list[_Video] = []
    for meta_path in sorted(suite_dir.glob("*/gt/*.meta.json")):
        family_dir = meta_path.parent.parent
        if families and family_dir.name not in families:
            continue
        try:
            meta = json.loads(meta_path.read_text())
        except json.JSONDecodeError as exc:
            raise DataError(meta_path, exc.lineno, f"not JSON ({exc.msg})") from None
        stem = meta_path.name[: -len(".meta.json")]
        video = family_dir / "videos" / meta.get("video", f"{stem}.mp4")
        tracks = meta_path.with_name(f"{stem}.tracks.jsonl")
        if not video.is_file():
            raise DataError(meta_path, None, f"its video {video} is missing")
        if not tracks.is_file():
            raise DataError(meta_path, None, f"its ground truth {tracks.name} is missing")
        found.append(_Video(family_dir.name, stem, video, tracks, int(meta.get("width", 0)), int(meta.get("height", 0))))
    if not found:
        raise UserError(f"{suite_dir}: no ground-truth tracks found (expected <family>/gt/<stem>.tracks.jsonl)")
    return found


def _read_rows(path: Path) -> dict[int, list[dict]]:
    by_frame: dict[int, list[dict]] = {}
    with path.open() as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                by_frame.setdefault(int(row["frame"]), []).append(row)
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise DataError(path, n, f"not a track row ({exc})") from None
    return by_frame


def _split_of(index: int, n_videos: int, val_every: int) -> str:
    """Every `val_every`-th video of a family validates; a family with one video trains only."""
    if n_videos < 2:
        return "train"
    return "val" if index % val_every == val_every - 1 or (n_videos < val_every and index == n_videos - 1) else "train"


def _frames_to_export(rows_by_frame: dict[int, list[dict]], every: int, min_visible: float,
                      per_object: int) -> set[int]:
    """Every `every`-th frame, plus frames so that each object is labelled in at least `per_object` of them.

    Brief appearances (a ball shown for a second before a cup covers it) would otherwise
    fall between the sampled frames and the detector would rarely see them.
    """
    n_frames = max(rows_by_frame) + 1 if rows_by_frame else 0
    chosen = set(range(0, n_frames, every))
    visible: dict[int, list[int]] = {}
    for frame, rows in sorted(rows_by_frame.items()):
        for row in rows:
            if row.get("box") is not None and float(row.get("visible", 0)) >= min_visible:
                visible.setdefault(int(row["id"]), []).append(frame)
    for frames in visible.values():
        missing = per_object - len(chosen.intersection(frames))
        if missing > 0:
            picks = [frames[(k + 1) * len(frames) // (per_object + 1)] for k in range(per_object)]
            chosen.update(picks[:missing] if missing < per_object else picks)
    return chosen


def export_yolo_dataset(suite_dir: Path, out_dir: Path, *, every: int = 5, min_visible: float = 0.25,
                        val_every: int = 5, families: list[str] | None = None, per_object: int = 3,
                        every_for: dict[str, int] | None = None, progress=lambda _msg: None) -> ExportSummary:
    """Write `out_dir/{images,labels}/{train,val}/` and `out_dir/data.yaml`; returns what was written."""
    import cv2

    suite_dir, out_dir = Path(suite_dir), Path(out_dir)
    videos = _discover(suite_dir, families)
    digest = hashlib.sha256()
    for v in videos:
        v.rows_by_frame = _read_rows(v.tracks)
        digest.update(v.tracks.read_bytes())
    classes = sorted({r["class"] for v in videos for rows in v.rows_by_frame.values() for r in rows
                      if r.get("box") is not None})
    if not classes:
        raise UserError(f"{suite_dir}: the ground truth has no visible boxes to train on")
    class_index = {c: i for i, c in enumerate(classes)}
    try:
        described = json.loads((suite_dir / "suite.json").read_text())
    except (OSError, json.JSONDecodeError):
        described = {}
    summary = ExportSummary(suite=str(suite_dir), suite_seed=described.get("seed"), suite_size=described.get("size"),
                            families=sorted({v.family for v in videos}),
                            names=dict(enumerate(classes)), every=every, every_for=dict(every_for or {}), per_object=per_object,
                            min_visible=min_visible)
    per_family: dict[str, list[_Video]] = {}
    for v in videos:
        per_family.setdefault(v.family, []).append(v)
    for split in ("train", "val"):
        (out_dir / "images" / split).mkdir(parents=True, exist_ok=True)
        (out_dir / "labels" / split).mkdir(parents=True, exist_ok=True)
        summary.videos[split] = summary.images[split] = summary.boxes[split] = 0
    for family, fam_videos in sorted(per_family.items()):
        for i, v in enumerate(fam_videos):
            split = _split_of(i, len(fam_videos), val_every)
            summary.videos[split] += 1
            chosen = _frames_to_export(v.rows_by_frame, (every_for or {}).get(family, every), min_visible, per_object)
            cap = opencv_capture(v.video)
            frame_no = 0
            while True:
                ok = cap.grab()
                if not ok:
                    break
                if frame_no in chosen:
                    ok, image = cap.retrieve()
                    if not ok:
                        break
                    h, w = image.shape[:2]
                    lines = []
                    for row in v.rows_by_frame.get(frame_no, []):
                        box = row.get("box")
                        if box is None or float(row.get("visible", 0)) < min_visible:
                            continue
                        x1, y1, x2, y2 = (float(b) for b in box)
                        x1, y1, x2, y2 = max(0, x1), max(0, y1), min(w, x2), min(h, y2)
                        if x2 - x1 < 2 or y2 - y1 < 2:
                            continue
                        cx, cy, bw, bh = (x1 + x2) / 2 / w, (y1 + y2) / 2 / h, (x2 - x1) / w, (y2 - y1) / h
                        lines.append(f"{class_index[row['class']]} {cx:.6f} {cy:.6f} {bw:.6f} {bh:.6f}")
                    name = f"{v.stem}_{frame_no:05d}"
                    cv2.imwrite(str(out_dir / "images" / split / f"{name}.jpg"), image, [cv2.IMWRITE_JPEG_QUALITY, 92])
                    (out_dir / "labels" / split / f"{name}.txt").write_text("".join(l + "\n" for l in lines))
                    summary.images[split] += 1
                    summary.boxes[split] += len(lines)
                frame_no += 1
            cap.release()
            progress(f"{family}/{v.stem}: {split}")
    if summary.images["val"] == 0:
        raise UserError(f"{suite_dir}: too few videos for a validation split (need 2 per family at least)")
    summary.suite_digest = digest.hexdigest()[:16]
    # No `path:` key: ultralytics then resolves train/val relative to this file, which works
    # wherever the folder is mounted (host or /data in the container).
    yaml_lines = ["train: images/train", "val: images/val", f"nc: {len(classes)}", "names:"]
    yaml_lines += [f"  {i}: {name}" for i, name in enumerate(classes)]
    (out_dir / "data.yaml").write_text("\n".join(yaml_lines) + "\n")
    (out_dir / "export.json").write_text(summary.model_dump_json(indent=2))
    return summary
