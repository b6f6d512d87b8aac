"""Encoder process: raw I420 frames on stdin -> H.264 mp4 (run by video.write_mp4).

Why a separate process: the same frames encoded inside a busy host process (after
OpenCV, the renderer, a test runner...) came out as one of two different byte
streams, the floating-point state of the process seemingly leaking into libx264's
decisions. A fresh interpreter that imports only PyAV and numpy gives the same bytes
every time. Usage: python -I encode.py OUT FPS WIDTH HEIGHT [AUDIO.s16 RATE]
(an optional mono 16-bit PCM file becomes an AAC track: the audio-cue families' beeps).
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
        plane.update(padded)  # type: ignore[arg-type]  # PyAV's stub says bytes; update() takes any buffer (no copy)
    return frame


def _mux_audio(container, stream, pcm: np.ndarray, rate: int) -> None:
    samples = pcm.astype(np.float32) / 32768.0
    frame_size = stream.codec_context.frame_size or 1024
    for k, start in enumerate(range(0, len(samples), frame_size)):
        chunk = np.zeros(frame_size, np.float32)
        part = samples[start:start + frame_size]
        chunk[: len(part)] = part
        frame = av.AudioFrame.from_ndarray(chunk[None, :], format="fltp", layout="mono")
        frame.sample_rate = rate
        frame.pts = start
        frame.time_base = Fraction(1, rate)
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)


def encode(out: str, fps: int, w: int, h: int, source, audio: np.ndarray | None = None, rate: int = 16000) -> int:
    size = w * h * 3 // 2
    count = 0
    with av.open(out, "w", format="mp4", options={"fflags": "+bitexact"}) as container:
        stream = container.add_stream("libx264", rate=Fraction(fps, 1),
                                      options={"crf": CRF, "preset": "veryfast", "threads": "1",
                                               "x264-params": "threads=1"})
        stream.pix_fmt = "yuv420p"
        stream.width, stream.height = w, h
        stream.codec_context.flags |= av.codec.context.Flags.bitexact
        astream = None
        if audio is not None:
            astream = container.add_stream("aac", rate=rate, layout="mono")
            astream.codec_context.flags |= av.codec.context.Flags.bitexact
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
        if astream is not None and audio is not None:
            _mux_audio(container, astream, audio, rate)
    return count


if __name__ == "__main__":
    out, fps, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    pcm = np.fromfile(sys.argv[5], dtype=np.int16) if len(sys.argv) > 5 else None
    rate = int(sys.argv[6]) if len(sys.argv) > 6 else 16000
    print(encode(out, fps, w, h, sys.stdin.buffer, pcm, rate))
