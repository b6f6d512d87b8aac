"""The run's detection cache on the host: each frame of a video is detected once per run.

A run asks many questions of one video (a VSTAT video's questions, a streaming item's
query points, each with its own copy cut at its query time). The tracker runtime keys
detections by the decoded frame's pixels (runtime/detcache.py); this module keeps those
rows between attempts, in the run folder:

    RUN/tracker-cache/<settings>/<video>/<attempt id>.jsonl

`<settings>` hashes what a frame's detections depend on besides its pixels (the weights
file's content, imgsz, conf, device, the tracker image); `<video>` is the source video's
content hash, so an attempt is handed rows of ITS video only. Rows of frames at or after
the attempt's query time are never handed over (a streaming query sees nothing of the
future, not even detections), and a container writes its rows only into its own output
folder: the host reads them (size-capped, regular files only, each row checked) and files
them under the attempt's id. What the container then gets is one read-only
`detections.jsonl` in its input folder. A cache hit gives the detections the detector gave
for the same pixels, so the tracks and the answer are those of a run that detected every
frame (tests/tracker/test_detection_cache.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from statebox.attempt_folder import ATTEMPTS_DIR
from statebox.replace_file import replace_text
from statebox.sandbox.workspace import open_regular
from statebox.userfiles import read_upto

CACHE_DIR = "tracker-cache"
ROWS_FILE = "detections.jsonl"  # the runtime's file in the input and output folders (runtime/cli.py)
MAX_FILE_BYTES = 32 * 1024 * 1024  # one attempt's rows: ~0.3 KB a frame, so about 100,000 frames
MAX_ROWS = 200_000  # handed to one attempt
_KEY = r"^[0-9a-f]{32}$"


class CacheRow(BaseModel):
    """One frame's detections as the runtime writes them (runtime/detcache.py:to_row)."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(pattern=_KEY)
    t: float = Field(ge=0)
    xyxy: list[tuple[float, float, float, float]] = Field(max_length=1000)
    conf: list[float] = Field(max_length=1000)
    cls: list[int] = Field(max_length=1000)

    @field_validator("t")
    @classmethod
    def _finite(cls_, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("t must be finite")
        return value

    def well_formed(self) -> bool:
        numbers = [v for box in self.xyxy for v in box] + self.conf
        return len(self.xyxy) == len(self.conf) == len(self.cls) and all(math.isfinite(v) for v in numbers)


def settings_key(weights: Path, *, imgsz: int, conf: float, device: str, image: str) -> str:
    """What a frame's detections depend on besides its pixels."""
    return _digest(json.dumps({"weights": file_digest(weights), "imgsz": imgsz, "conf": conf, "device": device,
                               "image": image}, sort_keys=True).encode())[:24]


_digests: dict[tuple[str, int, int], str] = {}
_digests_lock = threading.Lock()


def file_digest(path: Path) -> str:
    """sha256 of a file's content, remembered per (path, size, mtime) for this process."""
    st = os.stat(path)
    memo = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns)
    with _digests_lock:
        if memo in _digests:
            return _digests[memo]
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    with _digests_lock:
        _digests[memo] = h.hexdigest()
    return h.hexdigest()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_folder_of(attempt_dir: Path) -> Path | None:
    """The run folder an attempt folder lies in (RUN/attempts/<id>), else None: no cache outside a run."""
    attempt_dir = Path(attempt_dir)
    return attempt_dir.parent.parent if attempt_dir.parent.name == ATTEMPTS_DIR else None


class VideoCache:
    """One video's rows under one set of detector settings, in one run folder."""

    def __init__(self, run_dir: Path, settings: str, video: Path) -> None:
        self.folder = run_dir / CACHE_DIR / settings / file_digest(video)[:32]

    def hand_over(self, dest: Path, until: float | None) -> int:
        """Write the rows of frames before `until` (all when None), one per frame key, to `dest`; returns
        how many. Unreadable files and rows are skipped: a poisoned file costs only its own rows."""
        seen: set[str] = set()
        with open(dest, "w") as out:
            for path in sorted(self.folder.glob("*.jsonl")) if self.folder.is_dir() else []:
                for row in _read_rows(path):
                    if row.key in seen or (until is not None and row.t >= until):
                        continue
                    seen.add(row.key)
                    out.write(row.model_dump_json() + "\n")
                    if len(seen) >= MAX_ROWS:
                        return len(seen)
        return len(seen)

    def keep(self, produced: Path, attempt_id: str) -> int:
        """File the rows a container wrote (its output folder's detections.jsonl) under `attempt_id`;
        only checked rows are kept, written by the host. Returns how many."""
        if not produced.exists():
            return 0
        rows = list(_read_rows(produced))
        if not rows:
            return 0
        self.folder.mkdir(parents=True, exist_ok=True)
        name = "".join(c for c in attempt_id if c.isalnum() or c in "-_") or "attempt"
        replace_text(self.folder / f"{name}.jsonl", "".join(row.model_dump_json() + "\n" for row in rows))  # whole or none
        return len(rows)


def _read_rows(path: Path):
    """The well-formed rows of a rows file: a regular file (never a link), read up to MAX_FILE_BYTES."""
    try:
        handle = open_regular(path)
    except (OSError, ValueError):
        return
    with handle:
        data = read_upto(handle, MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        return  # over the cap: none of it (a cut row would be a wrong one)
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            row = CacheRow.model_validate_json(line)
        except ValidationError:
            continue
        if row.well_formed():
            yield row
