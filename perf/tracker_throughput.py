"""Tracker throughput (frames/s): statebox's tracker next to ultralytics' own `model.track(stream=True)` loop.

Why: people running tracker baselines want the standard stack as fast as it goes. Both
sides run in the same tracker container (network none, all cores), in the same process,
on the same video, with the same weights, image size, confidence threshold and device,
after a warm-up, alternating rounds (see statebox/tracker/runtime/bench.py). The peer is
the loop ultralytics documents; statebox's side decodes in its own thread, runs batched
forward passes and tracks with `trackers.ByteTrackTracker`. Target on CPU: >= 1.5x.

Usage: python perf/tracker_throughput.py [--video FILE] [--weights FILE] [--rounds 3] [--batch 8]
       (default video: a 20 s streaming_count clip generated here; default weights: the shipped ones)
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

TARGET = 1.5


def main() -> int:
    from statebox.benchmarks.synthetic.suite import make_suite
    from statebox.policies import load_policy
    from statebox.sandbox.docker import ContainerSpec, Mount, SandboxEngine
    from statebox.tracker import container as tc

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--video", type=Path)
    ap.add_argument("--weights", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--imgsz", type=int, default=320)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="statebox-perf-tracker-"))
    try:
        video = args.video
        if video is None:
            print("generating a streaming_count clip ...", flush=True)
            make_suite(work / "suite", size="tiny", seed=7, tasks=["streaming_count"], workers=1)
            video = sorted((work / "suite" / "streaming_count" / "videos").glob("*.mp4"))[0]
        weights = tc.resolve_weights(args.weights)
        engine = SandboxEngine()
        image = tc.tracker_image(progress=lambda m: print(m, flush=True))
        policy = load_policy("default")
        limits = policy.limits.model_copy(update={"cpus": float(os.cpu_count() or 1), "memory_mb": 4096,
                                                  "time_limit_s": 1200.0})
        policy = policy.model_copy(update={"limits": limits})
        out = work / "out"
        out.mkdir()
        os.chmod(out, 0o777)
        command = [tc.PYTHON, "-m", "sbtracker.bench", "--video", f"/videos/{video.name}",
                   "--weights", f"{tc.MODELS_MOUNT}/{weights.name}", "--rounds", str(args.rounds),
                   "--batch", str(args.batch), "--imgsz", str(args.imgsz)]
        spec = ContainerSpec(image=image, command=command, workspace=None, policy=policy, env=dict(tc.OFFLINE_ENV),
                             mounts=[Mount(source=video.resolve(), target=f"/videos/{video.name}"),
                                     Mount(source=weights, target=f"{tc.MODELS_MOUNT}/{weights.name}"),
                                     Mount(source=out, target=tc.OUT_MOUNT, read_only=False, writer="statebox")],
                             gpu=True)
        found: dict = {}

        def on_line(line: str) -> None:
            event = tc.parse_event_line(line)
            if event and event.get("event") == "bench":
                found.update(event)

        started = time.monotonic()
        result = engine.run(spec, work / "stdout.log", work / "stderr.log", on_stdout_line=on_line)
        if not found:
            print((work / "stderr.log").read_text()[-3000:], file=sys.stderr)
            print(f"benchmark failed: {result.status} (exit {result.exit_code}) {result.reason}", file=sys.stderr)
            return 1
        print(f"video {video.name}, weights {weights.name}, device {found['device']} (half={found['half']}), "
              f"imgsz {found['imgsz']}, batch {found['batch']}, "
              f"{time.monotonic() - started:.0f}s in the container")
        for name, rows in found["rounds"].items():
            per_round = ", ".join(f"{r['fps']:.1f}" for r in rows)
            print(f"  {name:18} median {found['median_fps'][name]:6.1f} fps  (rounds: {per_round}; "
                  f"{rows[-1]['frames']} frames, {rows[-1]['track_ids']} track ids, "
                  f"{rows[-1]['torch_threads']} torch threads)")
        ratio = found["ratio"]
        verdict = "meets" if ratio >= TARGET or found["device"] != "cpu" else "BELOW"
        print(f"ratio: {ratio:.2f}x statebox tracker / ultralytics model.track ({verdict} the {TARGET}x CPU target)")
        print(json.dumps({"ratio": ratio, "median_fps": found["median_fps"], "device": found["device"]}))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
