"""Deterministic H.264 mp4 output (and decoding for checks), through PyAV's bundled libx264.

Why PyAV and not cv2.VideoWriter: the opencv-python-headless wheel has no H.264
encoder ('avc1' is unavailable), and a system ffmpeg is not guaranteed on a fresh
machine, while PyAV (already a dependency) bundles libx264. One encoder thread and
the bitexact muxer flag make the bytes a pure function of the frames, so the same
seed gives byte-identical videos on the same library versions.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

CRF = "20"


def write_mp4(path: Path, frames: Iterable[np.ndarray], fps: int) -> int:
    """Encode BGR frames to `path` (H.264, yuv420p, no metadata); returns the frame count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part.mp4")
    count = 0
    with av.open(str(tmp), "w", format="mp4", options={"fflags": "+bitexact"}) as container:
        stream = container.add_stream(
            "libx264", rate=Fraction(fps, 1),
            options={"crf": CRF, "preset": "veryfast", "threads": "1", "x264-params": "threads=1"},
        )
        stream.pix_fmt = "yuv420p"
        stream.codec_context.flags |= av.codec.context.Flags.bitexact
        for frame in frames:
            if count == 0:
                stream.height, stream.width = frame.shape[:2]
            video_frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="bgr24")
            for packet in stream.encode(video_frame):
                container.mux(packet)
            count += 1
        for packet in stream.encode():
            container.mux(packet)
    tmp.replace(path)
    return count


def read_frames(path: Path) -> Iterator[tuple[float, np.ndarray]]:
    """Decode every frame of a video as (time in seconds, BGR array)."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            t = float(frame.pts * frame.time_base) if frame.pts is not None else 0.0
            yield t, frame.to_ndarray(format="bgr24")
