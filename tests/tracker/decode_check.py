"""Runs INSIDE the tracker image, in the hardened sandbox: the checks behind tests/tracker/test_decode_image.py.

Usage: python decode_check.py WEIGHTS VIDEO [VIDEO ...]
Prints one line `RESULT <json>` with what the host test asserts on:
- `process`: per video, the process reader's batches equal the thread reader's (indices,
  times, frames byte for byte), under the sandbox's pids limit and 64 MiB /dev/shm;
- `torchcodec`: torchcodec's version and, per video (the suite clips plus bt709, full-range,
  MPEG-4 and VP9 test videos made here with ffmpeg), the largest and mean absolute
  difference from OpenCV's frames, and whether indices and times agree;
- `hd`: 1920x1080 through the process reader: its ring shrinks to what /dev/shm allows
  (fewer frames than a batch) and the frames still equal the thread reader's;
- `big`: the process reader asked for 3840x2160 frames (two of them are more than half of
  /dev/shm): the decoder used and the logged reason;
- `tracks`: whether `run_tracking` writes the same tracks.jsonl with each decoder;
- `leaks`: processes other than this one and names in /dev/shm after everything closed;
- `pids_left`, `shm_free_mb`: the limits as the decoder saw them.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from sbtracker import decode_torchcodec
from sbtracker.decode import FrameReader
from sbtracker.decode_process import ProcessFrameReader, pids_left, shm_free_bytes
from sbtracker.decoders import open_reader
from sbtracker.detect import Detector, DetectorConfig
from sbtracker.track import run_tracking

MADE = {  # name -> ffmpeg arguments after the lavfi input
    "bt709.mp4": ["-pix_fmt", "yuv420p", "-c:v", "libx264", "-colorspace", "bt709", "-color_primaries", "bt709",
                  "-color_trc", "bt709"],
    "full_range.mp4": ["-pix_fmt", "yuv420p", "-color_range", "pc", "-c:v", "libx264"],
    "mpeg4.avi": ["-c:v", "mpeg4"],
    "vp9.webm": ["-c:v", "libvpx-vp9", "-deadline", "realtime"],
}


def make(folder: Path, name: str, args: list[str], size: str = "320x240", rate: int = 25) -> Path:
    path = folder / name
    subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", f"testsrc2=size={size}:rate={rate}:duration=1",
                    *args, "-y", str(path)], check=True)
    return path


def batches(reader) -> list:
    try:
        return list(reader)
    finally:
        reader.close()


def flat(bs: list) -> tuple[list, list, list]:
    return ([i for b in bs for i in b.indices], [t for b in bs for t in b.times], [im for b in bs for im in b.images])


def check_process(video: str) -> dict:
    out = {}
    for stride, batch in ((1, 8), (3, 5)):
        a, b = batches(FrameReader(video, stride=stride, batch=batch)), batches(
            ProcessFrameReader(video, stride=stride, batch=batch))
        (ia, ta, fa), (ib, tb, fb) = flat(a), flat(b)
        out[f"{stride}x{batch}"] = {"frames": len(fb), "same": ia == ib and ta == tb and len(fa) == len(fb) and all(
            x.tobytes() == y.tobytes() for x, y in zip(fa, fb))}
    return out


def check_torchcodec(video: str) -> dict:
    a = batches(FrameReader(video, stride=2, batch=8))
    reader = open_reader(video, stride=2, batch=8, decoder="torchcodec", device="cpu")
    kind, fallback = reader.kind, reader.fallback
    b = batches(reader)
    (ia, ta, fa), (ib, tb, fb) = flat(a), flat(b)
    diffs = [np.abs(x.astype(np.int16) - y.astype(np.int16)) for x, y in zip(fa, fb) if x.shape == y.shape]
    return {"kind": kind, "fallback": fallback, "frames": [len(fa), len(fb)], "indices_times_same": ia == ib and ta == tb,
            "shapes_same": len(diffs) == len(fa) == len(fb),
            "max": int(max((int(d.max()) for d in diffs), default=-1)),
            "mean": float(np.mean([d.mean() for d in diffs])) if diffs else -1.0,
            "bgr_contiguous": all(im.flags.c_contiguous and im.dtype == np.uint8 for im in fb)}


def others() -> list[str]:
    """Processes in this container other than this one and its ancestors (pid 1, the shell)."""
    mine = {os.getpid()}
    pid = os.getpid()
    while pid > 1:
        pid = int(Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].split()[1])
        mine.add(pid)
    return [Path(f"/proc/{p}/cmdline").read_text().replace("\0", " ")[:80] for p in os.listdir("/proc")
            if p.isdigit() and int(p) not in mine and Path(f"/proc/{p}/cmdline").exists()]


def main() -> int:
    weights, *videos = sys.argv[1:]
    torch.set_num_threads(1)
    work = Path("/tmp/decode-check")
    work.mkdir(exist_ok=True)
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    made = [str(make(work, name, args)) for name, args in MADE.items()]
    result: dict = {"pids_left": pids_left(), "shm_free_mb": round((shm_free_bytes() or 0) / 2**20, 1)}
    seconds["make"] = time.perf_counter() - t
    t = time.perf_counter()
    result["process"] = {Path(v).name: check_process(v) for v in videos}
    seconds["process"] = time.perf_counter() - t
    t = time.perf_counter()
    result["torchcodec"] = {"version": getattr(decode_torchcodec, "torchcodec_version", None),
                            "import_error": decode_torchcodec.IMPORT_ERROR,
                            "videos": {Path(v).name: check_torchcodec(v) for v in [*videos, *made]}}
    seconds["torchcodec"] = time.perf_counter() - t
    t = time.perf_counter()
    fast = ["-pix_fmt", "yuv420p", "-c:v", "libx264", "-preset", "ultrafast"]
    hd = make(work, "hd.mp4", fast, "1920x1080", rate=12)
    reader = open_reader(hd, stride=1, batch=8, decoder="process")
    kind, ring = reader.kind, getattr(reader, "ring", None)
    (ia, ta, fa), (ib, tb, fb) = flat(batches(FrameReader(hd, batch=8))), flat(batches(reader))
    result["hd"] = {"kind": kind, "ring": ring, "frames": len(fb),
                    "same": ia == ib and ta == tb and [x.tobytes() for x in fa] == [y.tobytes() for y in fb]}
    big = make(work, "big.mp4", fast, "3840x2160", rate=2)
    reader = open_reader(big, stride=1, batch=8, decoder="process")
    result["big"] = {"kind": reader.kind, "fallback": reader.fallback, "frames": sum(len(b.images) for b in batches(reader))}
    seconds["hd_big"] = time.perf_counter() - t
    t = time.perf_counter()
    detector = Detector(DetectorConfig(weights=weights, device="cpu"))
    logs, kinds = {}, {}
    for decoder in ("thread", "process", "torchcodec"):
        sink = io.StringIO()
        _, stats = run_tracking(videos[0], detector, batch=4, sink=sink, decoder=decoder)
        logs[decoder], kinds[decoder] = sink.getvalue(), (stats.decoder, stats.decoder_fallback)
    seconds["tracks"] = time.perf_counter() - t
    result["tracks"] = {"lines": logs["thread"].count("\n"), "kinds": kinds,
                        "same": {k: logs[k] == logs["thread"] for k in logs}}
    result["leaks"] = {"processes": others(), "shm": sorted(os.listdir("/dev/shm"))}
    result["seconds"] = {k: round(v, 1) for k, v in seconds.items()}
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
