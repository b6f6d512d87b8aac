"""Decode video frames with torchcodec: FFmpeg on the CPU, or NVDEC on a GPU (`device="cuda"`).

torchcodec (PyTorch's maintained video decoder) is in the tracker image only; importing
this module elsewhere raises `DecoderUnavailable`. It runs in the thread reader's
hand-over (`FrameReader`: a background thread, a bounded queue, errors re-raised in the
consumer); torchcodec's decoding runs in C++ outside the GIL. Batches come from
`VideoDecoder.get_frames_in_range(start, stop, step=stride)`, which decodes forward without
seeking between consecutive ranges, and are handed out as BGR uint8 numpy frames like
OpenCV's, so the detector and the per-object features see the same input whichever
decoder ran. Measured against OpenCV on the suite's H.264 clips and on bt709, full-range,
MPEG-4 and VP9 test videos: identical frames (tests/tracker/test_decode_torchcodec.py
holds it to 2 levels). On "cuda" the frames are decoded by NVDEC and copied to the host
once per batch (the detector takes host frames); that path has not been run here (no GPU).
Frame times use OpenCV's probed fps, the same formula as the other decoders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from .decode import FrameBatch, FrameReader, frame_time
from .decode_process import DecoderUnavailable

try:  # optional: in the tracker image, not in the host's venv
    import torchcodec
    from torchcodec.decoders import VideoDecoder
except Exception as exc:  # noqa: BLE001 - ImportError, or torchcodec's own RuntimeError when FFmpeg is missing
    VideoDecoder = None
    torchcodec_version: str | None = None
    IMPORT_ERROR: str | None = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
else:
    torchcodec_version = torchcodec.__version__
    IMPORT_ERROR = None


class TorchcodecFrameReader(FrameReader):
    """`FrameReader` whose batches come from torchcodec's `VideoDecoder(path, device=device)`."""

    kind = "torchcodec"

    def __init__(self, path: Path, *, stride: int = 1, batch: int = 8, prefetch: int = 4, device: str = "cpu") -> None:
        if VideoDecoder is None:
            raise DecoderUnavailable(f"torchcodec cannot be imported ({IMPORT_ERROR})")
        if stride < 1 or batch < 1:
            raise ValueError("stride and batch must be >= 1")
        self.device = device
        try:
            self._decoder = VideoDecoder(str(path), device=device, dimension_order="NHWC", seek_mode="exact",
                                         num_ffmpeg_threads=0)  # FFmpeg picks, as in OpenCV's FFmpeg backend
        except Exception as exc:  # noqa: BLE001 - e.g. no NVDEC for this codec, no CUDA: the caller falls back
            raise DecoderUnavailable(f"torchcodec cannot open {Path(path).name} on {device}: "
                                     f"{type(exc).__name__}: {exc}") from exc
        self.num_frames = int(self._decoder.metadata.num_frames or 0)
        super().__init__(path, stride=stride, batch=batch, prefetch=prefetch)

    def _batches(self) -> Iterator[FrameBatch]:
        step = self.batch * self.stride
        for start in range(0, self.num_frames, step):
            if self._stop.is_set():
                return
            stop = min(self.num_frames, start + step)
            frames = self._decoder.get_frames_in_range(start, stop, step=self.stride)
            rgb = frames.data.cpu().numpy()  # (n, h, w, 3) RGB uint8; from a GPU, one device->host copy a batch
            bgr = np.ascontiguousarray(rgb[..., ::-1])  # numpy, not torch.flip: a torch op here would run in
            # torch's OpenMP pool and fight the detector's forward pass running in another thread
            indices = list(range(start, stop, self.stride))
            self.counts.read += len(indices)
            self.counts.grabbed = stop
            yield FrameBatch(indices, [frame_time(i, self.info.fps) for i in indices], list(bgr))
