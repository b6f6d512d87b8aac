"""Which decoder reads a stream: `--decoder thread|process|torchcodec|auto`.

- thread: OpenCV in a background thread of the tracking process (`decode.FrameReader`).
- process: OpenCV in a child process, frames through shared memory (`decode_process`).
- torchcodec: torchcodec's FFmpeg decoder, NVDEC when the detector runs on a GPU
  (`decode_torchcodec`); in the tracker image only.
- auto: the thread reader (measured best on CPU, see docs/tracker.md "Decoding"; the
  process and torchcodec readers are opt-in).

A decoder that cannot run here (a sandbox limit on /dev/shm or pids, torchcodec missing or
unable to open the video on the device) is replaced by the thread reader, and the reason
is kept on the reader (`fallback`) for the run's log, so a run never fails for want of a
faster decoder. Errors while decoding are not fallbacks: they reach the consumer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Protocol

from .decode import Counts, FrameBatch, FrameReader, VideoInfo
from .decode_process import DecoderUnavailable, ProcessFrameReader

DECODERS = ("auto", "thread", "process", "torchcodec")
AUTO = "thread"


class Reader(Protocol):
    kind: str  # the decoder that reads: thread | process | torchcodec
    fallback: str | None  # why the decoder asked for was replaced by this one (None: it was not)
    info: VideoInfo
    counts: Counts

    @property
    def frames_read(self) -> int: ...

    @property
    def frames_grabbed(self) -> int: ...

    def __iter__(self) -> Iterator[FrameBatch]: ...

    def close(self) -> None: ...


def open_reader(path: Path, *, stride: int = 1, batch: int = 8, decoder: str = "auto",
                device: str = "cpu") -> Reader:
    """A started reader of `path`; `reader.fallback` is None, or why `decoder` was replaced by the thread reader."""
    if decoder not in DECODERS:
        raise ValueError(f"unknown decoder {decoder!r}; expected one of {', '.join(DECODERS)}")
    wanted = AUTO if decoder == "auto" else decoder
    reason: str | None = None
    reader: Reader | None = None
    try:
        if wanted == "process":
            reader = ProcessFrameReader(path, stride=stride, batch=batch)
        elif wanted == "torchcodec":
            from .decode_torchcodec import TorchcodecFrameReader  # imports torch: only when asked for

            reader = TorchcodecFrameReader(path, stride=stride, batch=batch,
                                           device=str(device) if str(device).startswith("cuda") else "cpu")
    except DecoderUnavailable as exc:
        reason = f"{wanted} decoder unavailable: {exc}; using the thread decoder"
    if reader is None:
        reader = FrameReader(path, stride=stride, batch=batch)
    reader.fallback = reason
    return reader
