"""Throughput and accuracy in one run: sbtracker's pipeline vs ultralytics' own loop, one stream and many.

Runs wherever torch runs: inside the tracker container (`python -m sbtracker.bench`, what
perf/tracker_throughput.py does) or directly on a machine whose GPU containers cannot
reach (`python -m statebox.tracker.runtime.bench`, the same module). Both sides get the
same videos, weights, image size, confidence threshold and device, each in a process of its
own (spawned fresh: ultralytics changes process-wide thread settings, see `bench`), warmed
up first, alternating rounds (the order rotating from round to round, one side working at a
time) so that a noisy neighbour slows both alike:

- peer: `model.track(source=video, stream=True, tracker="bytetrack.yaml")`, the loop
  ultralytics documents (decoding, one frame per forward pass, its own ByteTrack);
- sbtracker: `run_tracking` (decoding in its own thread, device-side letterbox and batched
  NMS, batched channels-last forward passes, class-agnostic `trackers.ByteTrackTracker`).

Then, for sbtracker only: `streams` videos in one `run_tracking_many` (aggregate fps, GPU
utilisation sampled meanwhile on CUDA) and the detector-only ceiling (the bare forward
pass on a ready device tensor at the multi-stream batch, `streams * batch` frames, and the
same image size). With `truth` files (the generator's per-frame tracks), HOTA / IDF1 /
MOTA for both sides on every distinct video (trackeval; where it is not installed, as in
the container, the tracks are written to `out` and the caller scores them).

Each side keeps its own torch thread setting: ultralytics sets cores - 1 on CPUs when its
predictor starts, sbtracker every core the process may use when a run starts. Besides fps,
each round records the side's CPU time per frame (its process's own, so a loaded machine
moves it less than wall time). Prints one `SBTRACK {"event": "bench", ...}` line.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import threading
import time
from pathlib import Path

from .decode import probe
from .detect import Detector, DetectorConfig, resolve_device
from .track import run_tracking, run_tracking_many


class GpuSampler:
    """GPU utilisation (%) sampled every 0.2 s while a `with` block runs; None off CUDA or without NVML/nvidia-smi."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _read(self) -> float | None:
        import torch

        try:
            return float(torch.cuda.utilization(torch.device(self.device)))  # NVML through pynvml
        except Exception:  # noqa: BLE001 - no pynvml: ask nvidia-smi
            if shutil.which("nvidia-smi") is None:
                return None
            index = self.device.split(":")[1] if ":" in self.device else "0"
            try:
                out = subprocess.run(["nvidia-smi", "-i", index, "--query-gpu=utilization.gpu",
                                      "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=5)
                return float(out.stdout.strip().splitlines()[0])
            except (OSError, ValueError, IndexError, subprocess.SubprocessError):
                return None

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            value = self._read()
            if value is None:
                return
            self.samples.append(value)

    def __enter__(self) -> "GpuSampler":
        if self.device.startswith("cuda"):
            self._thread = threading.Thread(target=self._run, name="sbtracker-gpu-util", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=6)

    @property
    def mean(self) -> float | None:
        return round(statistics.fmean(self.samples), 1) if self.samples else None


def ultralytics_tracks(model, video: Path, *, imgsz: int, conf: float, iou: float, device: str, half: bool,
                       stride: int = 1) -> list[tuple[int, list[tuple[int, tuple[float, ...]]]]]:
    """ultralytics' documented loop, `model.track(stream=True)` with its bytetrack.yaml, from a fresh
    tracker state: [(frame number, [(track id, xyxy)])] per processed frame."""
    model.predictor = None  # a fresh tracker state, as a new run would have
    frames = []
    for n, result in enumerate(model.track(source=str(video), stream=True, tracker="bytetrack.yaml", imgsz=imgsz,
                                           conf=conf, iou=iou, device=device, quantize=16 if half else None,
                                           verbose=False, vid_stride=stride)):
        objs = []
        if result.boxes is not None and result.boxes.id is not None:
            objs = [(int(i), tuple(float(v) for v in box))
                    for i, box in zip(result.boxes.id.tolist(), result.boxes.xyxy.tolist())]
        frames.append((n * stride, objs))
    return frames


def frame_rows(frames: list[tuple[int, list[tuple[int, tuple[float, ...]]]]]) -> list[dict]:
    return [{"frame": f, "objects": [{"id": i, "xyxy": [round(v, 1) for v in box]} for i, box in objs]}
            for f, objs in frames]


class _Side:
    """One side of the comparison in its own process (see `bench`): commands in, results out, over a pipe."""

    def __init__(self, name: str, settings: dict) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: nothing inherited from this one
        self.name = name
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_side_main, args=(child, name, settings), name=f"bench-{name}", daemon=True)
        self._proc.start()
        child.close()
        self.info = self._reply()  # the worker's settings once its model is loaded

    def _reply(self):
        try:
            status, value = self._conn.recv()
        except EOFError:
            raise RuntimeError(f"the {self.name} process died (exit {self._proc.exitcode})") from None
        if status != "ok":
            raise RuntimeError(f"the {self.name} process failed:\n{value}")
        return value

    def call(self, op: str, *args):
        self._conn.send((op, args))
        return self._reply()

    def close(self) -> None:
        try:
            self._conn.send(None)
        except OSError:
            pass
        self._proc.join(timeout=30)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()


def _side_main(conn, name: str, s: dict) -> None:
    """A side's process: load its model once, then run what the parent asks, timing it here."""
    import traceback

    try:
        import torch

        if name == "ultralytics":
            from ultralytics import YOLO

            model = YOLO(s["weights"], task="detect")
            iou = DetectorConfig("").iou

            def single(video: str, reference: bool = False):  # noqa: ARG001 - the other side's signature
                return ultralytics_tracks(model, Path(video), imgsz=s["imgsz"], conf=s["conf"], iou=iou,
                                          device=s["device"], half=s["device"] != "cpu", stride=s["stride"])

            info: dict[str, object] = {"precision": "fp16" if s["device"] != "cpu" else "fp32"}
        else:
            detector = Detector(DetectorConfig(weights=s["weights"], imgsz=s["imgsz"], conf=s["conf"],
                                               device=s["device"], precision=s["precision"], compile=s["compile"]))

            def single(video: str, reference: bool = False):
                detector.config.device_pre = not reference
                try:
                    log, _ = run_tracking(Path(video), detector, stride=s["stride"], batch=s["batch"])
                finally:
                    detector.config.device_pre = True
                return [(f.frame, [(o.id, o.xyxy) for o in f.objects]) for f in log.frames]

            info = {"precision": detector.precision, "compile": s["compile"], "fast_path": detector.fast}
        conn.send(("ok", {**info, "pid": os.getpid()}))
        while (msg := conn.recv()) is not None:
            op, args = msg
            cpu0, started = time.process_time(), time.perf_counter()
            if op == "single":
                frames = single(*args)
                value = {"frames": frames}
            elif op == "multi":
                results = run_tracking_many([Path(v) for v in args[0]], detector, stride=s["stride"], batch=s["batch"])
                value = {"frames": sum(st.frames_read for _, st in results),
                         "tracks": [[(f.frame, [(o.id, o.xyxy) for o in f.objects]) for f in log.frames]
                                    for log, _ in results]}
            elif op == "ceiling":
                info_ = probe(Path(args[0]))
                value = {"fps": detector.forward_only(args[1], (info_.height, info_.width), seconds=args[2])}
            else:
                raise ValueError(f"unknown bench command {op}")
            value.update(seconds=time.perf_counter() - started, cpu_s=time.process_time() - cpu0,
                         torch_threads=torch.get_num_threads())
            conn.send(("ok", value))
    except BaseException:  # noqa: BLE001 - the parent raises it with the traceback
        try:
            conn.send(("error", traceback.format_exc()))
        except OSError:
            pass


def bench(videos: list[Path], weights: str, imgsz: int, conf: float, device: str, rounds: int, batch: int,
          stride: int = 1, streams: int = 1, truth: list[Path | None] | None = None, out: Path | None = None,
          compare_reference: bool = False, ceiling_s: float = 3.0, precision: str = "auto",
          compile: str = "off") -> dict:
    """Each side runs in its own process, started fresh (spawn), and only one side works at a time.

    Why separate processes: ultralytics changes process-wide state when it sets up a predictor
    (torch's intra-op threads to cores - 1, OpenCV's threads to 1, OMP_NUM_THREADS=1 at import,
    cudnn.benchmark for streams) and leaves its allocations and thread pools behind; measured in one
    process, whichever side ran second inherited the other's state. A user runs one or the other,
    so each side is measured in a process of its own, as it would run; the parent only hands out
    the rounds (alternating, the order rotating) and never loads a model itself.
    """
    videos = [Path(v) for v in videos]
    device = resolve_device(device)
    settings = {"weights": weights, "imgsz": imgsz, "conf": conf, "device": device, "stride": stride,
                "batch": batch, "precision": precision, "compile": compile}
    sides: dict[str, _Side] = {}
    try:
        sides["ultralytics"] = _Side("ultralytics", settings)
        sides["statebox"] = _Side("statebox", settings)
        plan = {"ultralytics_track": ("ultralytics", False), "sbtracker": ("statebox", False)}
        if compare_reference:
            plan["sbtracker_reference_path"] = ("statebox", True)
        for side, reference in plan.values():  # warm-up: model fusing, predictor set-up, first-call allocations
            sides[side].call("single", str(videos[0]), reference)
        rows: dict[str, list[dict]] = {name: [] for name in plan}
        tracks: dict[str, dict[Path, list]] = {"ultralytics": {}, "statebox": {}}
        names = list(plan)
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:  # the order rotates: no side always runs after another
                side, reference = plan[name]
                res = sides[side].call("single", str(videos[0]), reference)
                frames = res["frames"]
                ids = {i for _, objs in frames for i, _ in objs}
                rows[name].append({"frames": len(frames), "seconds": round(res["seconds"], 3),
                                   "fps": round(len(frames) / res["seconds"], 2),
                                   "cpu_ms_per_frame": round(1000 * res["cpu_s"] / max(1, len(frames)), 1),
                                   "track_ids": len(ids), "torch_threads": res["torch_threads"]})
                if not reference:
                    tracks[side][videos[0]] = frames
        med = {k: statistics.median(r["fps"] for r in v) for k, v in rows.items()}

        # many streams: the given videos, repeated until there are `streams` of them
        stream_videos = [videos[i % len(videos)] for i in range(streams)]
        with GpuSampler(device) as sampler:
            multi = sides["statebox"].call("multi", [str(v) for v in stream_videos])
        for video, frames in zip(stream_videos, multi["tracks"]):
            tracks["statebox"].setdefault(video, frames)
        ceiling = sides["statebox"].call("ceiling", str(videos[0]), batch * streams, ceiling_s)["fps"]

        # accuracy: every distinct video with a truth file, both sides
        truth_for = {v: t for v, t in zip(videos, truth or []) if t}
        for video in truth_for:
            if video not in tracks["ultralytics"]:
                tracks["ultralytics"][video] = sides["ultralytics"].call("single", str(video))["frames"]
        info = {name: side.info for name, side in sides.items()}
    finally:
        for proc in sides.values():
            proc.close()
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for side, per_video in tracks.items():
            for video, frames in per_video.items():
                if video in truth_for:
                    (out / f"{video.stem}.{side}.tracks.jsonl").write_text(
                        "".join(json.dumps(r) + "\n" for r in frame_rows(frames)))
    metrics = score_tracks(tracks, truth_for)

    return {"videos": [v.name for v in videos], "device": device, "half": device != "cpu", "imgsz": imgsz,
            "batch": batch, "stride": stride, "precision": info["statebox"]["precision"],
            "compile": info["statebox"]["compile"], "fast_path": info["statebox"]["fast_path"],
            "peer_precision": info["ultralytics"]["precision"], "processes": "one per side",
            "side_pids": {name: i["pid"] for name, i in info.items()}, "parent_pid": os.getpid(),
            "rounds": rows, "median_fps": med,
            "single_stream_ratio": round(med["sbtracker"] / med["ultralytics_track"], 3),
            "ratio": round(med["sbtracker"] / med["ultralytics_track"], 3),
            "streams": streams, "multi_stream_fps": round(multi["frames"] / multi["seconds"], 2),
            "multi_stream_frames": multi["frames"], "multi_stream_seconds": round(multi["seconds"], 3),
            "detector_ceiling_fps": round(ceiling, 2), "ceiling_batch": batch * streams,
            "gpu_util": sampler.mean, "metrics": metrics,
            "hota": {side: m["HOTA"] for side, m in metrics.items()} if metrics else None}


def score_tracks(tracks: dict[str, dict[Path, list]], truth_for: dict[Path, Path]) -> dict | None:
    """Per side, trackeval's metrics combined over the videos with truth; None when trackeval is missing."""
    if not truth_for:
        return None
    try:
        from .metrics import combine, load_truth, tracking_metrics

        import trackeval  # noqa: F401 - present outside the container only; the host scores the written tracks
    except ImportError:
        return None
    out = {}
    for side, per_video in tracks.items():
        per = []
        for video, truth_path in truth_for.items():
            frames = per_video[video]
            per.append(tracking_metrics(load_truth(truth_path), {f: objs for f, objs in frames}, [f for f, _ in frames]))
        out[side] = combine(per)
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="sbtracker.bench", description=__doc__.splitlines()[0])
    p.add_argument("--video", action="append", required=True, help="repeatable; the first is the single-stream one")
    p.add_argument("--truth", action="append", default=[], help="per-frame truth tracks, one per --video, in order")
    p.add_argument("--weights", required=True)
    p.add_argument("--imgsz", type=int, default=320)
    p.add_argument("--conf", type=float, default=0.1)
    p.add_argument("--device", default="auto")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--stride", type=int, default=1)
    p.add_argument("--streams", type=int, default=1)
    p.add_argument("--out", help="folder for both sides' tracks of the videos with truth")
    p.add_argument("--compare-reference", action="store_true", help="also time the previous host-side path")
    p.add_argument("--ceiling-seconds", type=float, default=3.0, help="how long to time the bare forward pass")
    p.add_argument("--precision", default="auto", help="statebox's forward pass: auto | fp32 | fp16 | bf16")
    p.add_argument("--compile", default="off", help="statebox's torch.compile: off | inductor | reduce-overhead | "
                                                    "cudagraphs | aot_eager")
    args = p.parse_args(argv)
    result = bench([Path(v) for v in args.video], args.weights, args.imgsz, args.conf, args.device, args.rounds,
                   args.batch, args.stride, args.streams, [Path(t) if t else None for t in args.truth],
                   Path(args.out) if args.out else None, args.compare_reference, args.ceiling_seconds,
                   precision=args.precision,
                   compile=args.compile)
    print("SBTRACK " + json.dumps({"event": "bench", **result}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
