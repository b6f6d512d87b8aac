"""Deterministic H.264 mp4 output (and decoding for checks), through PyAV's bundled libx264.

Why PyAV and not cv2.VideoWriter: the opencv-python-headless wheel has no H.264
encoder ('avc1' is unavailable), and a system ffmpeg is not guaranteed on a fresh
machine, while PyAV (already a dependency) bundles libx264. One encoder thread and
the bitexact muxer flag make the bytes a pure function of the frames, so the same
seed gives byte-identical videos on the same library versions. The BGR -> YUV 4:2:0
conversion is done here in integer arithmetic (BT.601, limited range) rather than by
swscale, whose SIMD paths depend on buffer alignment and made the same frames encode
to different bytes from one process to the next.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

CRF = "20"


def bgr_to_i420(frame: np.ndarray) -> np.ndarray:
    """BGR uint8 (h, w, 3) -> planar I420 (h * 3 / 2, w), BT.601 limited range, exact integer maths."""
    h, w = frame.shape[:2]
    b, g, r = (frame[..., k].astype(np.int32) for k in range(3))
    y = ((66 * r + 129 * g + 25 * b + 128) >> 8) + 16
    # 2x2 chroma averages, rounded
    r2 = (r[0::2, 0::2] + r[1::2, 0::2] + r[0::2, 1::2] + r[1::2, 1::2] + 2) >> 2
    g2 = (g[0::2, 0::2] + g[1::2, 0::2] + g[0::2, 1::2] + g[1::2, 1::2] + 2) >> 2
    b2 = (b[0::2, 0::2] + b[1::2, 0::2] + b[0::2, 1::2] + b[1::2, 1::2] + 2) >> 2
    u = ((-38 * r2 - 74 * g2 + 112 * b2 + 128) >> 8) + 128
    v = ((112 * r2 - 94 * g2 - 18 * b2 + 128) >> 8) + 128
    out = np.empty((h * 3 // 2, w), np.uint8)
    out[:h] = np.clip(y, 0, 255)
    out[h:h + h // 4] = np.clip(u, 0, 255).reshape(h // 4, w)
    out[h + h // 4:] = np.clip(v, 0, 255).reshape(h // 4, w)
    return out


def _i420_frame(i420: np.ndarray) -> av.VideoFrame:
    """An AVFrame whose every byte is set, row padding included.

    Frames made by `from_ndarray` leave the padding at the end of each row
    uninitialised, and x264's SIMD copies read it: the same pictures then encoded to
    different bytes in different processes.
    """
    h = i420.shape[0] * 2 // 3
    w = i420.shape[1]
    frame = av.VideoFrame(w, h, "yuv420p")
    planes = (i420[:h], i420[h:h + h // 4].reshape(h // 2, w // 2), i420[h + h // 4:].reshape(h // 2, w // 2))
    for plane, data in zip(frame.planes, planes):
        rows = plane.buffer_size // plane.line_size
        padded = np.zeros((rows, plane.line_size), np.uint8)
        padded[: data.shape[0], : data.shape[1]] = data
        plane.update(padded)
    return frame


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
            video_frame = _i420_frame(bgr_to_i420(frame))
            for packet in stream.encode(video_frame):
                container.mux(packet)
            count += 1
        for packet in stream.encode():
            container.mux(packet)
    tmp.replace(path)
    return count


def read_frames(path: Path, format: str = "bgr24") -> Iterator[tuple[float, np.ndarray]]:
    """Decode every frame of a video as (time in seconds, array in `format`: bgr24, or yuv420p for exact planes)."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            t = float(frame.pts * frame.time_base) if frame.pts is not None else 0.0
            yield t, frame.to_ndarray(format=format)
