"""Harness throughput: attempts per minute with a trivial agent at concurrency 1, 4 and 8,
next to the same attempts run one `docker run` at a time from a shell loop, in the same run.

The peer is the floor a user would write by hand (no workspace preparation, no
audit, no scoring, no store): it tells what the harness's own work costs and
what concurrency buys back.

Usage: .venv/bin/python perf/harness_throughput.py [--attempts N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_dataset(root: Path, n: int) -> tuple[Path, Path]:
    videos = root / "videos"
    videos.mkdir()
    subprocess.run(
        ["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=10:duration=2",
         "-pix_fmt", "yuv420p", str(videos / "clip.mp4")],
        check=True,
    )
    docs = [{"source_task": "t", "video_id": "clip", "video_path": "clip.mp4", "question": f"q{i}?", "answer": "3",
             "choices": [], "answer_index": -1} for i in range(n)]
    data = root / "data.json"
    data.write_text(json.dumps({"data": {"t": docs}}))
    return data, videos


def harness(data: Path, videos: Path, run_dir: Path, concurrency: int) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "statebox.cli", "run", "--agent", "shell", "--bench", "vstat", "--data", str(data),
         "--videos", str(videos), "--concurrency", str(concurrency), "--run-dir", str(run_dir),
         "--option", "command=echo 3 > answer.txt", "--json"],
        capture_output=True, text=True, cwd=ROOT,
    )
    if proc.returncode != 0:
        raise SystemExit(f"harness run failed: {proc.stderr[-1500:]}")
    return time.perf_counter() - t0


def shell_loop(image: str, videos: Path, n: int) -> float:
    script = (
        f"for i in $(seq {n}); do docker run --rm --network none -v {videos}:/workspace:ro -w /workspace "
        f"{image} sh -c 'echo 3 > /dev/null' >/dev/null || exit 1; done"
    )
    t0 = time.perf_counter()
    subprocess.run(["bash", "-c", script], check=True)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=24)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from statebox.sandbox.images import ensure_image

    image = ensure_image("sandbox")
    n = args.attempts
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data, videos = make_dataset(root, n)
        loop_s = shell_loop(image, videos, n)
        loop_rate = 60 * n / loop_s
        print(f"peer: shell loop of plain `docker run`, {n} attempts: {loop_s:.1f} s -> {loop_rate:.1f} attempts/min")
        for c in (1, 4, 8):
            secs = harness(data, videos, root / f"run-c{c}", c)
            rate = 60 * n / secs
            print(f"statebox run --concurrency {c}: {secs:.1f} s -> {rate:.1f} attempts/min "
                  f"(ratio vs shell loop: {rate / loop_rate:.2f}x)")


if __name__ == "__main__":
    main()
