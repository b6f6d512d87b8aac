"""Throughput, measured inside the tracker container: sbtracker's pipeline vs ultralytics' own loop.

Both sides get the same video, the same weights, image size, confidence threshold and
device, in the same process, warmed up first, alternating rounds so that a noisy
neighbour slows both alike:

- peer: `model.track(source=video, stream=True, tracker="bytetrack.yaml")`, the loop
  ultralytics documents (decoding, one frame per forward pass, its own ByteTrack);
- sbtracker: `run_tracking` (decoding in its own thread, batched channels-last forward
  passes on every granted core, class-agnostic `trackers.ByteTrackTracker`).

Each side keeps its own torch thread setting: ultralytics sets cores - 1 on CPUs when its
predictor starts, sbtracker every core the container grants when a run starts.

Prints one JSON object: frames, seconds and fps per side and per round, and the ratio of
the medians.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path


def bench(video: Path, weights: str, imgsz: int, conf: float, device: str, rounds: int, batch: int,
          stride: int = 1) -> dict:
    import torch
    from ultralytics import YOLO

    from .detect import Detector, DetectorConfig, resolve_device
    from .track import run_tracking

    device = resolve_device(device)
    half = device != "cpu"
    peer_model = YOLO(weights, task="detect")
    detector = Detector(DetectorConfig(weights=weights, imgsz=imgsz, conf=conf, device=device))

    def peer() -> tuple[int, float, int]:
        peer_model.predictor = None  # a fresh tracker state per round, as a new run would have
        started = time.perf_counter()
        n, ids = 0, set()
        for result in peer_model.track(source=str(video), stream=True, tracker="bytetrack.yaml", imgsz=imgsz,
                                       conf=conf, iou=detector.config.iou, device=device, quantize=16 if half else None, verbose=False,
                                       vid_stride=stride):
            n += 1
            if result.boxes is not None and result.boxes.id is not None:
                ids.update(int(i) for i in result.boxes.id.tolist())
        return n, time.perf_counter() - started, len(ids)

    def ours() -> tuple[int, float, int]:
        started = time.perf_counter()
        log, stats = run_tracking(video, detector, stride=stride, batch=batch)
        ids = {o.id for f in log.frames for o in f.objects}
        return stats.frames_read, time.perf_counter() - started, len(ids)

    # warm-up: model fusing, predictor set-up, first-call allocations
    peer()
    ours()
    rows = {"ultralytics_track": [], "sbtracker": []}
    for _ in range(rounds):
        for name, fn in (("ultralytics_track", peer), ("sbtracker", ours)):
            frames, seconds, ids = fn()
            rows[name].append({"frames": frames, "seconds": round(seconds, 3), "fps": round(frames / seconds, 2),
                               "track_ids": ids, "torch_threads": torch.get_num_threads()})
    med = {k: statistics.median(r["fps"] for r in v) for k, v in rows.items()}

    return {"video": video.name, "device": device, "half": half, "imgsz": imgsz, "batch": batch, "stride": stride,
            "rounds": rows, "median_fps": med,
            "ratio": round(med["sbtracker"] / med["ultralytics_track"], 3)}


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="sbtracker.bench")
    p.add_argument("--video", required=True)
    p.add_argument("--weights", required=True)
    p.add_argument("--imgsz", type=int, default=320)
    p.add_argument("--conf", type=float, default=0.1)
    p.add_argument("--device", default="auto")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    args = p.parse_args(argv)
    print("SBTRACK " + json.dumps({"event": "bench", **bench(Path(args.video), args.weights, args.imgsz, args.conf,
                                                               args.device, args.rounds, args.batch)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
