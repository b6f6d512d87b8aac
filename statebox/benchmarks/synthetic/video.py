"""Deterministic H.264 mp4 output (and decoding for checks), through PyAV's bundled libx264.

Why PyAV and not cv2.VideoWriter: the opencv-python-headless wheel has no H.264
encoder ('avc1' is unavailable), and a system ffmpeg is not guaranteed on a fresh
machine, while PyAV (already a dependency) bundles libx264. One encoder thread, the
bitexact muxer flag, explicit timestamps and a fresh encoder process per video
(`encode.py`: inside a busy host process libx264 gave one of two byte streams for the
same frames) make the bytes a pure function of the frames, so the same seed gives
byte-identical videos on the same library versions. The BGR -> YUV 4:2:0
conversion is done here in integer arithmetic (BT.601, limited range) rather than by
swscale, whose SIMD paths depend on buffer alignment and made the same frames encode
to different bytes from one process to the next.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import av
import numpy as np

from statebox.media_input import AV_CONTAINER_OPTIONS, file_url

ENCODER = Path(__file__).with_name("encode.py")


def bgr_to_i420(frame: np.ndarray) -> np.ndarray:
    """BGR uint8 (h, w, 3) -> planar I420 (h * 3 / 2, w), BT.601 limited range, exact integer maths.

    In uint16 (half the memory traffic of int32): luma sums reach 56228, and the chroma sums
    are kept non-negative by adding 128 * 256 before the shift, which is the "+ 128" offset
    itself: floor((x + 128) / 256) + 128 == (x + 32896) >> 8, the same bytes as signed maths."""
    h, w = frame.shape[:2]
    b, g, r = (frame[..., k].astype(np.uint16) for k in range(3))
    y = ((66 * r + 129 * g + 25 * b + 128) >> 8) + 16
    # 2x2 chroma averages, rounded
    r2 = (r[0::2, 0::2] + r[1::2, 0::2] + r[0::2, 1::2] + r[1::2, 1::2] + 2) >> 2
    g2 = (g[0::2, 0::2] + g[1::2, 0::2] + g[0::2, 1::2] + g[1::2, 1::2] + 2) >> 2
    b2 = (b[0::2, 0::2] + b[1::2, 0::2] + b[0::2, 1::2] + b[1::2, 1::2] + 2) >> 2
    u = (112 * b2 + 32896 - 38 * r2 - 74 * g2) >> 8  # subtraction order keeps every step >= 0
    v = (112 * r2 + 32896 - 94 * g2 - 18 * b2) >> 8
    out = np.empty((h * 3 // 2, w), np.uint8)
    out[:h] = np.minimum(y, 255)
    out[h:h + h // 4] = np.minimum(u, 255).reshape(h // 4, w)
    out[h + h // 4:] = np.minimum(v, 255).reshape(h // 4, w)
    return out


def write_mp4(path: Path, frames: Iterable[np.ndarray], fps: int, audio: np.ndarray | None = None,
              audio_rate: int = 16000) -> int:
    """Encode BGR frames to `path` (H.264, yuv420p, no metadata) in a fresh encoder process; returns the frame count.

    `audio` (mono int16 samples at `audio_rate`) adds an AAC track."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part.mp4")
    frames = list(frames)
    if not frames:
        raise ValueError("no frames to encode")
    h, w = frames[0].shape[:2]
    payload = b"".join(bgr_to_i420(f).tobytes() for f in frames)
    # Run encode.py as a plain script in isolated mode (-I: no script folder, PYTHONPATH or user site
    # on sys.path): it imports only PyAV and numpy, not the statebox package (pydantic, the
    # schema), which saves ~0.15 s of start-up per video.
    args = [sys.executable, "-I", str(ENCODER), str(tmp), str(fps), str(w), str(h)]
    pcm = None
    if audio is not None:
        pcm = path.with_suffix(".part.s16")
        np.asarray(audio, dtype=np.int16).tofile(pcm)
        args += [str(pcm), str(audio_rate)]
    try:
        proc = subprocess.run(args, input=payload, capture_output=True, env=_clean_env())
    finally:
        if pcm is not None:
            pcm.unlink(missing_ok=True)
    if proc.returncode != 0:
        raise RuntimeError(f"encoding {path.name} failed: {proc.stderr.decode(errors='replace').strip()[-500:]}")
    tmp.replace(path)
    return len(frames)


def _clean_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "PYTHONPATH", "LANG", "LC_ALL", "SYSTEMROOT", "TMPDIR")
    return {k: v for k, v in os.environ.items() if k in keep}


def read_audio(path: Path) -> tuple[np.ndarray, int]:
    """The first audio track as mono float32 samples and its sample rate ((empty, 0) when there is none)."""
    with av.open(file_url(path), container_options=AV_CONTAINER_OPTIONS) as container:
        if not container.streams.audio:
            return np.zeros(0, np.float32), 0
        stream = container.streams.audio[0]
        chunks = [f.to_ndarray().reshape(-1).astype(np.float32) for f in container.decode(stream)]
        return (np.concatenate(chunks) if chunks else np.zeros(0, np.float32)), int(stream.rate)


def read_frames(path: Path, format: str = "bgr24") -> Iterator[tuple[float, np.ndarray]]:
    """Decode every frame of a video as (time in seconds, array in `format`: bgr24, or yuv420p for exact planes)."""
    with av.open(file_url(path), container_options=AV_CONTAINER_OPTIONS) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            t = float(frame.pts * frame.time_base) if frame.pts is not None and frame.time_base is not None else 0.0
            yield t, frame.to_ndarray(format=format)
