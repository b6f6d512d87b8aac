"""Encoder process: raw I420 frames on stdin -> H.264 mp4 (run by video.write_mp4).

Why a separate process: the same frames encoded inside a busy host process (after
OpenCV, the renderer, a test runner...) came out as one of two different byte
streams, the floating-point state of the process seemingly leaking into libx264's
decisions. A fresh interpreter that imports only PyAV and numpy gives the same bytes
every time. Usage: python -m statebox.benchmarks.synthetic.encode OUT FPS WIDTH HEIGHT
"""

from __future__ import annotations

import sys
from fractions import Fraction

import av
import numpy as np

CRF = "20"


def _frame(i420: np.ndarray, w: int, h: int) -> av.VideoFrame:
    """An AVFrame whose every byte is set, row padding included (x264 reads the padding)."""
    frame = av.VideoFrame(w, h, "yuv420p")
    planes = (i420[:h], i420[h:h + h // 4].reshape(h // 2, w // 2), i420[h + h // 4:].reshape(h // 2, w // 2))
    for plane, data in zip(frame.planes, planes):
        padded = np.zeros((plane.buffer_size // plane.line_size, plane.line_size), np.uint8)
        padded[: data.shape[0], : data.shape[1]] = data
        plane.update(padded)
    return frame


def encode(out: str, fps: int, w: int, h: int, source) -> int:
    size = w * h * 3 // 2
    count = 0
    with av.open(out, "w", format="mp4", options={"fflags": "+bitexact"}) as container:
        stream = container.add_stream("libx264", rate=Fraction(fps, 1),
                                      options={"crf": CRF, "preset": "veryfast", "threads": "1",
                                               "x264-params": "threads=1"})
        stream.pix_fmt = "yuv420p"
        stream.width, stream.height = w, h
        stream.codec_context.flags |= av.codec.context.Flags.bitexact
        while True:
            raw = source.read(size)
            if not raw:
                break
            if len(raw) != size:
                raise SystemExit(f"short frame: {len(raw)} of {size} bytes")
            frame = _frame(np.frombuffer(raw, np.uint8).reshape(h * 3 // 2, w), w, h)
            frame.pts = count
            frame.time_base = Fraction(1, fps)
            for packet in stream.encode(frame):
                container.mux(packet)
            count += 1
        for packet in stream.encode():
            container.mux(packet)
    return count


if __name__ == "__main__":
    out, fps, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    print(encode(out, fps, w, h, sys.stdin.buffer))
