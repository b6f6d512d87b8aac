"""Sandbox test fixtures: a small generated video with identifying metadata, and the image."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


def make_video(path: Path, seconds: float = 4, rate: int = 10, title: str = "", comment: str = "") -> Path:
    cmd = ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc=size=128x96:rate={rate}",
           "-t", str(seconds), "-c:v", "libx264", "-pix_fmt", "yuv420p"]
    if title:
        cmd += ["-metadata", f"title={title}"]
    if comment:
        cmd += ["-metadata", f"comment={comment}"]
    subprocess.run(cmd + [str(path)], check=True)
    return path


@pytest.fixture(scope="session")
def source_video(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ecbench-data")
    return make_video(folder / "kitchen_scene0099.mp4", title="kitchen_scene0099 from ecbench",
                      comment="item ecb-000777")


@pytest.fixture(scope="session")
def sandbox_image(docker_engine) -> str:
    from statebox.sandbox.images import ensure_image

    return ensure_image("sandbox")


@pytest.fixture()
def agent_dir(limited_dir) -> Path:
    """A size-limited folder (64 MB, its own tmpfs) the container's uid 1000 may write."""
    return limited_dir(64)
