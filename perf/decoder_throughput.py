"""Tracker throughput with each decoder: `--decoder thread | process | torchcodec`, one stream and N streams.

Why: the tracker's default decoder (`sbtracker.decoders.AUTO`) is the one that measures
best here; this prints the figures behind that choice. In the tracker container (network
none, every core, CPU torch), suite weights, imgsz 320, batch 8, for each decoder in
rotating order per round:
- decode only: frames/s iterating the reader over the first video (nothing else running);
- single stream: `run_tracking` over the first video (decode + detect + ByteTrack);
- N streams: `run_tracking_many` over the videos (aggregate frames/s);
plus the load average before and after (the machine is shared). Medians over the rounds;
the last line is one JSON object. `--device cuda` runs torchcodec on NVDEC when the
container gets a GPU (not measured here: no GPU).

Usage: python perf/decoder_throughput.py [--video FILE ...] [--rounds 3] [--streams 3] [--device cpu]
       (default videos: a streaming_count and two cube_count clips of a seed-7 tiny suite generated here)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DECODERS = ("thread", "process", "torchcodec")


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def inside(args: argparse.Namespace) -> dict:
    """The measurement, in the tracker image (imports sbtracker and torch)."""

    from sbtracker.decoders import open_reader
    from sbtracker.detect import Detector, DetectorConfig
    from sbtracker.track import run_tracking, run_tracking_many

    detector = Detector(DetectorConfig(weights=args.weights, device=args.device, imgsz=args.imgsz))
    videos = [Path(v) for v in args.video]
    streams = [videos[i % len(videos)] for i in range(args.streams)]
    run_tracking(videos[0], detector, batch=args.batch)  # warm-up
    figures: dict[str, dict[str, list[float]]] = {d: {"decode_only": [], "single": [], "multi": []} for d in DECODERS}
    used: dict[str, str] = {}
    load_before = load()
    for r in range(args.rounds):
        for decoder in DECODERS[r % len(DECODERS):] + DECODERS[:r % len(DECODERS)]:
            t = time.perf_counter()
            reader = open_reader(videos[0], batch=args.batch, decoder=decoder, device=detector.device)
            n = sum(len(b.images) for b in reader)
            reader.close()
            figures[decoder]["decode_only"].append(n / (time.perf_counter() - t))
            used[decoder] = reader.kind if reader.fallback is None else f"{reader.kind} ({reader.fallback})"
            _, stats = run_tracking(videos[0], detector, batch=args.batch, decoder=decoder)
            figures[decoder]["single"].append(stats.fps)
            t = time.perf_counter()
            results = run_tracking_many(streams, detector, batch=args.batch, decoder=decoder)
            figures[decoder]["multi"].append(sum(s.frames_read for _, s in results) / (time.perf_counter() - t))
            print(f"round {r} {decoder}: " + ", ".join(f"{k} {v[-1]:.1f} fps" for k, v in figures[decoder].items()),
                  flush=True)
    return {"event": "decoders", "device": detector.device, "imgsz": args.imgsz, "batch": args.batch,
            "streams": args.streams, "rounds": args.rounds, "cpus": os.cpu_count(), "used": used,
            "median_fps": {d: {k: round(statistics.median(v), 1) for k, v in f.items()} for d, f in figures.items()},
            "all_fps": {d: {k: [round(x, 1) for x in v] for k, v in f.items()} for d, f in figures.items()},
            "load_before": load_before, "load_after": load()}


def in_container(args: argparse.Namespace, videos: list[Path], weights: Path, work: Path) -> dict:
    from statebox.policies import load_policy
    from statebox.sandbox.docker import ContainerSpec, Mount, SandboxEngine
    from statebox.tracker import container as tc

    engine = SandboxEngine()
    image = tc.tracker_image(progress=lambda m: print(m, flush=True))
    policy = load_policy("default")
    limits = policy.limits.model_copy(update={"cpus": float(os.cpu_count() or 1), "memory_mb": 4096,
                                              "time_limit_s": 1800.0})
    policy = policy.model_copy(update={"limits": limits})
    mounts = [Mount(source=Path(__file__).resolve(), target="/perf/decoder_throughput.py"),
              Mount(source=weights, target=f"{tc.MODELS_MOUNT}/{weights.name}")]
    command = [tc.PYTHON, "/perf/decoder_throughput.py", "--inside", "--weights", f"{tc.MODELS_MOUNT}/{weights.name}",
               "--rounds", str(args.rounds), "--streams", str(args.streams), "--batch", str(args.batch),
               "--imgsz", str(args.imgsz), "--device", args.device]
    for i, video in enumerate(videos):
        mounts.append(Mount(source=video.resolve(), target=f"/videos/{i}/{video.name}"))
        command += ["--video", f"/videos/{i}/{video.name}"]
    spec = ContainerSpec(image=image, command=command, workspace=None, policy=policy, env=dict(tc.OFFLINE_ENV),
                         mounts=mounts, gpu=args.device != "cpu")
    found: dict = {}

    def on_line(line: str) -> None:
        print(line.rstrip(), flush=True)
        if line.startswith("{"):
            found.update(json.loads(line))

    result = engine.run(spec, work / "stdout.log", work / "stderr.log", on_stdout_line=on_line)
    if not found:
        print((work / "stderr.log").read_text()[-3000:], file=sys.stderr)
        raise SystemExit(f"measurement failed: {result.status} (exit {result.exit_code}) {result.reason}")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--video", action="append", default=[])
    ap.add_argument("--weights")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--streams", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--imgsz", type=int, default=320)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inside:
        print(json.dumps(inside(args)), flush=True)
        return 0
    import shutil

    from statebox.tracker import container as tc

    work = Path(tempfile.mkdtemp(prefix="statebox-perf-decoders-"))
    try:
        videos = [Path(v) for v in args.video]
        if not videos:
            from statebox.benchmarks.synthetic.suite import make_suite

            make_suite(work / "suite", size="tiny", seed=7, tasks=["streaming_count", "cube_count"], workers=1)
            videos = [work / "suite" / fam / "videos" / f"{stem}.mp4" for fam, stem in (
                ("streaming_count", "streaming_count_0000"), ("cube_count", "cube_count_main_0000"),
                ("cube_count", "cube_count_control_0000"))]
        found = in_container(args, videos, tc.resolve_weights(args.weights), work)
        print(json.dumps(found))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
