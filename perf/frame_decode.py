"""Frame extraction speed: `vtools frames` next to plain ffmpeg extracting the same frames.

Why: agents and the mllm baseline decode frames on every attempt; if vtools were slower
than the obvious ffmpeg command, users would rightly bypass it (and lose frame
accounting). Both sides run as fresh processes (start-up included), write JPEG files for
exactly the same frame numbers, and are measured alternately in the same run; the ratio
is ffmpeg's wall time over vtools' (> 1: vtools is faster).

Scenarios (a 60 s testsrc clip made here with ffmpeg):
  uniform32  32 frames at lmms-eval's uniform indices
  fps1       one frame per second (60 frames)
Peers: ffmpeg single pass with a `select` filter on the frame numbers (exact frames);
for uniform32 also one accurate-seek ffmpeg call per frame (`-ss T -i ... -frames:v 1`).
The best ffmpeg time is the peer.

    .venv/bin/python perf/frame_decode.py [--size 1280x720] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
VTOOLS = REPO / "statebox" / "tools" / "vtools.py"


def make_clip(path: Path, size: str, seconds: int, fps: int) -> None:
    subprocess.run(
        ["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", f"testsrc=size={size}:rate={fps}",
         "-t", str(seconds), "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", str(path)],
        check=True,
    )


def timed(cmd: list[str] | list[list[str]]) -> float:
    """Wall seconds to run one command (or several in sequence)."""
    cmds = cmd if cmd and isinstance(cmd[0], list) else [cmd]
    start = time.perf_counter()
    for c in cmds:
        subprocess.run(c, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def fresh(folder: Path) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--rate", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("ffmpeg") is None:
        print("ffmpeg is not installed: no peer to compare with", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="statebox-perf-") as tmp:
        root = Path(tmp)
        clip = root / "clip.mp4"
        print(f"making a {args.seconds} s {args.size}@{args.rate} testsrc clip (libx264) ...", flush=True)
        make_clip(clip, args.size, args.seconds, args.rate)
        n_frames = args.seconds * args.rate
        scenarios = {
            "uniform32": (["--uniform", "32"], np.linspace(0, n_frames - 1, 32).astype(int).tolist()),
            "fps1": (["--fps", "1"], [k * args.rate for k in range(args.seconds)]),
        }
        vt = [sys.executable, str(VTOOLS), "frames", str(clip), "--root", str(root)]
        results = []
        for name, (flags, indices) in scenarios.items():
            select = "+".join(f"eq(n\\,{i})" for i in indices)
            peers: dict[str, list] = {
                "ffmpeg select": ["ffmpeg", "-loglevel", "error", "-y", "-i", str(clip), "-vf", f"select='{select}'",
                                  "-vsync", "vfr", "-q:v", "3", str(root / "ff" / "f_%04d.jpg")],
            }
            if name == "uniform32":
                peers["ffmpeg seek/frame"] = [
                    ["ffmpeg", "-loglevel", "error", "-y", "-ss", f"{i / args.rate:.6f}", "-i", str(clip),
                     "-frames:v", "1", "-q:v", "3", str(root / "ff" / f"s_{k:04d}.jpg")]
                    for k, i in enumerate(indices)
                ]
            times: dict[str, list[float]] = {"vtools": [], **{p: [] for p in peers}}
            for _ in range(args.repeat):
                fresh(root / "vt")
                times["vtools"].append(timed(vt + flags + ["--out", str(root / "vt")]))
                for peer, cmd in peers.items():
                    fresh(root / "ff")
                    times[peer].append(timed(cmd))
            # Same frames on both sides: same count, and near-identical pixels.
            ours = sorted((root / "vt").glob("*.jpg"))
            fresh(root / "ff")
            timed(peers["ffmpeg select"])
            theirs = sorted((root / "ff").glob("*.jpg"))
            assert len(ours) == len(indices) == len(theirs), (len(ours), len(indices), len(theirs))
            import cv2

            diff = max(
                float(np.abs(cv2.imread(str(a)).astype(int) - cv2.imread(str(b)).astype(int)).mean())
                for a, b in zip(ours, theirs)
            )
            assert diff < 4.0, f"vtools and ffmpeg disagree on the frames (mean abs diff {diff:.1f})"
            best_peer = min(peers, key=lambda p: statistics.median(times[p]))
            med = {k: statistics.median(v) for k, v in times.items()}
            results.append((name, len(indices), med, best_peer, diff))

        print(f"\n{'scenario':<10} {'frames':>6} {'tool':<18} {'median s':>9} {'frames/s':>9}")
        for name, n, med, best_peer, diff in results:
            for tool, secs in med.items():
                print(f"{name:<10} {n:>6} {tool:<18} {secs:>9.3f} {n / secs:>9.1f}")
        print()
        ok = True
        for name, n, med, best_peer, diff in results:
            ratio = med[best_peer] / med["vtools"]
            ok &= ratio >= 1.0
            print(f"{name}: vtools is {ratio:.2f}x the speed of {best_peer} (same frames, max mean pixel diff {diff:.2f})")
        print(f"target (at least as fast as ffmpeg): {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
