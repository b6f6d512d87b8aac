"""What the signal tests (test_signals_and_lock.py, test_signal_anywhere.py) set up and look at:
a workspace root of the test's own, a one-video vstat dataset, and the engine's statebox
containers by label.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import docker


def run_env(tmp_path: Path) -> dict:
    ws = tmp_path / "ws-root"
    ws.mkdir(exist_ok=True)
    return dict(os.environ, STATEBOX_WORKSPACE_ROOT=str(ws))


def workspaces_left(tmp_path: Path) -> list[str]:
    root = tmp_path / "ws-root"
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) if root.exists() else []


def vstat_dataset(tmp_path: Path, questions: list[str]) -> tuple[Path, Path]:
    videos = tmp_path / "videos"
    videos.mkdir(exist_ok=True)
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=5:duration=1",
                    "-pix_fmt", "yuv420p", str(videos / "clip.mp4")], check=True)
    docs = [{"source_task": "t", "video_id": "c", "video_path": "clip.mp4", "question": q, "answer": "3",
             "choices": [], "answer_index": -1} for q in questions]
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"data": {"t": docs}}))
    return data, videos


def statebox_containers(**labels: str) -> list:
    client = docker.from_env()
    try:
        filters = ["statebox=1"] + [f"statebox.{k}={v}" for k, v in labels.items()]
        # a container may go between the engine's list and its inspect (an attempt ending): not an error
        return client.containers.list(all=True, filters={"label": filters}, ignore_removed=True)
    finally:
        client.close()
