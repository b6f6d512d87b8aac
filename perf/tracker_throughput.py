"""Tracker throughput and accuracy: statebox's tracker next to ultralytics' own `model.track(stream=True)` loop.

Why: people running tracker baselines want the standard stack as fast as it goes, on one
clip and on a whole benchmark sharing a GPU, and a speed-up that loses tracking accuracy
is not one. In one run (statebox/tracker/runtime/bench.py), with the same videos,
weights, image size, confidence threshold and device, in the same process, after a
warm-up, alternating rounds:

- single-stream fps for both sides (the first video) and their ratio;
- aggregate fps of `--streams N` videos in one statebox process (batched across streams);
- the detector-only ceiling: the bare forward pass at the same batch (N x --batch) and size;
- GPU utilisation during the multi-stream run (null on CPU);
- HOTA / IDF1 / MOTA of both sides against the generated suite's exact per-frame tracks
  (trackeval), on every video given.

Each side runs in a process of its own (ultralytics changes process-wide thread settings;
measured in one process, the side that ran second inherited them), one side at a time.
statebox's forward pass runs in bf16 on a CPU that computes it natively (AVX512-BF16/AMX;
`--precision fp32` for the fp32 figure; ultralytics' loop has no reduced precision on CPUs)
and in fp16 on a GPU, as ultralytics' does there. The load average before and after is
printed and kept in the JSON line (the targets are ratios because the machine is shared).

By default it runs in the tracker container (network none, all cores, a GPU when the
engine offers one); `--no-docker` runs the same module in this Python (torch and
ultralytics installed here: machines whose GPU containers cannot reach), as does
`python -m statebox.tracker.runtime.bench`.

Targets (ratios measured in the same run): CPU: single stream >= 2x ultralytics' loop and
HOTA >= ultralytics'. GPU (imgsz 320): single stream >= 800 fps, 16 streams >= 5,000 fps
and >= 0.5x the detector ceiling, >= 8x ultralytics' loop per GPU (imgsz 640: >= 0.5x the
ceiling with 16 streams). Targets of the other device class are reported `unmeasured`;
none passes by default. The last line is one JSON object.

Usage: python perf/tracker_throughput.py [--device auto|cpu|cuda] [--streams N] [--video FILE --truth FILE ...]
       [--weights FILE] [--rounds 3] [--batch 8] [--imgsz 320] [--no-docker]
       (default videos: a streaming_count and two cube_count clips generated here, with their truth)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CPU_RATIO = 2.0
GPU_SINGLE_FPS = 800.0
GPU_MULTI_FPS = 5000.0
GPU_CEILING_SHARE = 0.5
GPU_PER_GPU_RATIO = 8.0


def default_videos(work: Path) -> list[tuple[Path, Path]]:
    from statebox.benchmarks.synthetic.suite import make_suite

    print("generating streaming_count and cube_count clips ...", flush=True)
    suite = work / "suite"
    make_suite(suite, size="tiny", seed=7, tasks=["streaming_count", "cube_count"], workers=1)
    picks = [("streaming_count", "streaming_count_0000"), ("cube_count", "cube_count_main_0000"),
             ("cube_count", "cube_count_control_0000")]
    return [(suite / fam / "videos" / f"{stem}.mp4", suite / fam / "gt" / f"{stem}.tracks.jsonl") for fam, stem in picks]


def run_in_container(pairs: list[tuple[Path, Path | None]], weights: Path, bench_args: list[str], work: Path) -> dict:
    from statebox.policies import load_policy
    from statebox.sandbox.docker import ContainerSpec, Mount, SandboxEngine
    from statebox.sandbox.workspace import limited_folder
    from statebox.tracker import container as tc

    engine = SandboxEngine()
    image = tc.tracker_image(progress=lambda m: print(m, flush=True))
    policy = load_policy("default")  # every core, CPU torch's memory (a GPU container gets limits.gpu_memory_mb)
    limits = policy.limits.model_copy(update={"cpus": float(os.cpu_count() or 1), "memory_mb": 4096,
                                              "time_limit_s": 1800.0})
    policy = policy.model_copy(update={"limits": limits})
    out = limited_folder(256, inodes=1000)
    try:
        mounts = [Mount(source=weights, target=f"{tc.MODELS_MOUNT}/{weights.name}"),
                  Mount(source=out.path, target=tc.OUT_MOUNT, read_only=False)]
        command = [tc.PYTHON, "-m", "sbtracker.bench", "--weights", f"{tc.MODELS_MOUNT}/{weights.name}",
                   "--out", tc.OUT_MOUNT, *bench_args]
        for i, (video, truth) in enumerate(pairs):
            mounts.append(Mount(source=video.resolve(), target=f"/videos/{i}/{video.name}"))
            command += ["--video", f"/videos/{i}/{video.name}"]
            if truth is not None:
                mounts.append(Mount(source=truth.resolve(), target=f"/truth/{i}/{truth.name}"))
                command += ["--truth", f"/truth/{i}/{truth.name}"]
        spec = ContainerSpec(image=image, command=command, workspace=None, policy=policy, env=dict(tc.OFFLINE_ENV),
                             mounts=mounts, gpu=True)
        found: dict = {}

        def on_line(line: str) -> None:
            event = tc.parse_event_line(line)
            if event and event.get("event") == "bench":
                found.update(event)

        result = engine.run(spec, work / "stdout.log", work / "stderr.log", on_stdout_line=on_line)
        if not found:
            print((work / "stderr.log").read_text()[-3000:], file=sys.stderr)
            raise SystemExit(f"benchmark failed: {result.status} (exit {result.exit_code}) {result.reason}")
        found["gpu_requested"] = result.gpu
        if found.get("metrics") is None:  # trackeval lives on the host: score the tracks the container wrote
            found["metrics"] = score_written(out.path, pairs)
            found["hota"] = {side: m["HOTA"] for side, m in found["metrics"].items()} if found["metrics"] else None
        return found
    finally:
        out.cleanup()


def score_written(folder: Path, pairs: list[tuple[Path, Path | None]]) -> dict | None:
    from statebox.tracker.runtime.metrics import combine, load_tracks_jsonl, load_truth, tracking_metrics

    out = {}
    for side in ("statebox", "ultralytics"):
        per = []
        for video, truth in dict.fromkeys(pairs):
            path = folder / f"{video.stem}.{side}.tracks.jsonl"
            if truth is None or not path.is_file():
                continue
            frames, boxes = load_tracks_jsonl(path)
            per.append(tracking_metrics(load_truth(truth), boxes, frames))
        if per:
            out[side] = combine(per)
    return out or None


def targets(r: dict) -> dict[str, str]:
    """Each target: met | missed | unmeasured (the other device class's, or a figure that is missing)."""
    on_gpu = str(r["device"]).startswith("cuda")
    verdict = lambda ok: "met" if ok else "missed"  # noqa: E731
    hota = r.get("hota") or {}
    out = {"hota_statebox_ge_ultralytics": verdict(hota["statebox"] >= hota["ultralytics"])
           if {"statebox", "ultralytics"} <= set(hota) else "unmeasured"}
    out["cpu_single_stream_ratio_ge_2"] = "unmeasured" if on_gpu else verdict(r["single_stream_ratio"] >= CPU_RATIO)
    gpu = {"gpu_single_stream_ge_800fps": None, "gpu_16_streams_ge_5000fps": None,
           "gpu_16_streams_ge_half_ceiling": None, "gpu_per_gpu_ge_8x_ultralytics": None}
    if on_gpu and r["imgsz"] == 320:
        gpu["gpu_single_stream_ge_800fps"] = r["median_fps"]["sbtracker"] >= GPU_SINGLE_FPS
    if on_gpu and r["streams"] >= 16:
        if r["imgsz"] == 320:
            gpu["gpu_16_streams_ge_5000fps"] = r["multi_stream_fps"] >= GPU_MULTI_FPS
            gpu["gpu_per_gpu_ge_8x_ultralytics"] = (
                r["multi_stream_fps"] >= GPU_PER_GPU_RATIO * r["median_fps"]["ultralytics_track"])
        gpu["gpu_16_streams_ge_half_ceiling"] = r["multi_stream_fps"] >= GPU_CEILING_SHARE * r["detector_ceiling_fps"]
    out.update({k: "unmeasured" if v is None else verdict(v) for k, v in gpu.items()})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--video", type=Path, action="append", default=[])
    ap.add_argument("--truth", type=Path, action="append", default=[], help="per-frame truth, one per --video")
    ap.add_argument("--weights", type=Path)
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    ap.add_argument("--streams", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--imgsz", type=int, default=320)
    ap.add_argument("--compare-reference", action="store_true", help="also time the previous host-side detection path")
    ap.add_argument("--no-docker", action="store_true", help="run in this Python (needs torch + ultralytics here)")
    ap.add_argument("--precision", default="auto", help="statebox's forward pass: auto (fp16 on a GPU, bf16 on a CPU "
                                                       "with native bf16, else fp32) | fp32 | fp16 | bf16")
    ap.add_argument("--compile", default="off", help="statebox's torch.compile: off | inductor | reduce-overhead | "
                                                     "cudagraphs | aot_eager (inductor needs a C compiler)")
    args = ap.parse_args()
    if args.streams < 1:
        raise SystemExit("--streams must be >= 1")

    from statebox.tracker import container as tc

    work = Path(tempfile.mkdtemp(prefix="statebox-perf-tracker-"))
    try:
        if args.video:
            truths: list[Path | None] = list(args.truth) + [None] * (len(args.video) - len(args.truth))
            pairs = list(zip(args.video, truths))
        else:
            pairs = default_videos(work)
        weights = tc.resolve_weights(args.weights)
        bench_args = ["--device", args.device, "--streams", str(args.streams), "--rounds", str(args.rounds),
                      "--batch", str(args.batch), "--imgsz", str(args.imgsz), "--precision", args.precision,
                      "--compile", args.compile]
        if args.compare_reference:
            bench_args.append("--compare-reference")
        started, load_before = time.monotonic(), os.getloadavg()
        if args.no_docker:
            from statebox.tracker.runtime.bench import bench

            r = bench([v for v, _ in pairs], str(weights), args.imgsz, 0.1, args.device, args.rounds, args.batch,
                      streams=args.streams, truth=[t for _, t in pairs], compare_reference=args.compare_reference,
                      precision=args.precision, compile=args.compile)
            where = "this Python"
        else:
            r = run_in_container(pairs, weights, bench_args, work)
            where = "the tracker container"
        print(f"videos {', '.join(r['videos'])}; weights {weights.name}; device {r['device']}; statebox "
              f"{r.get('precision')} (compile {r.get('compile')}), ultralytics {r.get('peer_precision')}; imgsz "
              f"{r['imgsz']}, batch {r['batch']}; each side in its own process; {time.monotonic() - started:.0f}s in {where}")
        for name, rows in r["rounds"].items():
            per_round = ", ".join(f"{x['fps']:.1f}" for x in rows)
            cpu = ", ".join(f"{x.get('cpu_ms_per_frame', 0):.0f}" for x in rows)
            print(f"  single stream {name:24} median {r['median_fps'][name]:8.1f} fps  (rounds: {per_round}; "
                  f"CPU ms/frame: {cpu}; {rows[-1]['frames']} frames, {rows[-1]['track_ids']} track ids, "
                  f"{rows[-1]['torch_threads']} torch threads)")
        print(f"  single-stream ratio statebox / ultralytics: {r['single_stream_ratio']:.2f}x")
        print(f"  {r['streams']} stream(s) in one process: {r['multi_stream_fps']:.1f} fps aggregate "
              f"({r['multi_stream_frames']} frames); detector-only ceiling at batch {r['ceiling_batch']}: "
              f"{r['detector_ceiling_fps']:.1f} images/s ({r['multi_stream_fps'] / r['detector_ceiling_fps']:.2f}x of it)")
        print(f"  GPU utilisation: {r['gpu_util'] if r['gpu_util'] is not None else 'n/a (not on a GPU)'}")
        for side, m in (r.get("metrics") or {}).items():
            print(f"  {side:12} HOTA {m['HOTA']:.3f}  IDF1 {m['IDF1']:.3f}  MOTA {m['MOTA']:.3f}  "
                  f"DetA {m['DetA']:.3f}  AssA {m['AssA']:.3f}  ID switches {m['IDSW']}  ({m['videos']} videos)")
        load = {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]}
        print(f"  load average (1, 5, 15 min) before {load['before']}, after {load['after']} on {os.cpu_count()} CPUs")
        checks = targets(r)
        for name, state in checks.items():
            print(f"  target {name}: {state}")
        print(json.dumps({"device": r["device"], "imgsz": r["imgsz"], "batch": r["batch"],
                          "precision": r.get("precision"), "compile": r.get("compile"),
                          "single_stream_ratio": r["single_stream_ratio"], "median_fps": r["median_fps"],
                          "streams": r["streams"], "multi_stream_fps": r["multi_stream_fps"],
                          "detector_ceiling_fps": r["detector_ceiling_fps"], "gpu_util": r["gpu_util"],
                          "hota": r.get("hota"), "metrics": r.get("metrics"), "load_average": load,
                          "targets": checks}))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
