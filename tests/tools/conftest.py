"""Clips for the tool tests, made with ffmpeg once per session (small: 320x240, a few seconds)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

VTOOLS = Path(__file__).resolve().parents[2] / "statebox" / "tools" / "vtools.py"


def ffmpeg(*args: str) -> None:
    if shutil.which("ffmpeg") is None:
        pytest.fail("ffmpeg is required by the tool tests (installed by scripts/setup)")
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *args], check=True)


@pytest.fixture(scope="session")
def clips(tmp_path_factory) -> dict[str, Path]:
    """h264 with B-frames and short open GOPs, mpeg4 in AVI, and a still-then-moving clip with a hard cut."""
    root = tmp_path_factory.mktemp("clips")
    out = {
        "h264": root / "h264.mp4",
        "mpeg4": root / "mpeg4.avi",
        "motion": root / "motion.mp4",
    }
    ffmpeg("-f", "lavfi", "-i", "testsrc2=size=320x240:rate=10", "-t", "8", "-c:v", "libx264",
           "-x264-params", "keyint=20:open-gop=1:bframes=3", "-pix_fmt", "yuv420p", str(out["h264"]))
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=320x240:rate=12", "-t", "5", "-c:v", "mpeg4", "-bf", "2",
           "-q:v", "4", str(out["mpeg4"]))
    # 0-3 s: a still grey picture; 3-6 s: a moving pattern; cut at 6 s to solid red.
    ffmpeg("-f", "lavfi", "-i", "color=c=gray:size=320x240:rate=10:d=3",
           "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=10:d=3",
           "-f", "lavfi", "-i", "color=c=red:size=320x240:rate=10:d=2",
           "-filter_complex", "[0:v][1:v][2:v]concat=n=3:v=1[v]", "-map", "[v]",
           "-c:v", "libx264", "-pix_fmt", "yuv420p", str(out["motion"]))
    return out
