"""DOCKER_HOST pointing at another engine: a second dockerd on its own socket runs the attempts.

The second engine gets the sandbox image by `docker save | docker load` (no
registry here), then a real `statebox run` with DOCKER_HOST set must run its
containers there — proven by that engine's own event stream.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from second_engine import SecondEngine

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture
def second_engine(docker_engine):
    with SecondEngine(Path("/tmp") / f"sbx-d2-{os.getpid()}") as host:
        yield host


def test_run_against_docker_host(second_engine, tmp_path):
    SecondEngine.load_image_into(second_engine, "sandbox")  # the image and its base: the tag is a hash over both
    videos = tmp_path / "videos"
    videos.mkdir()
    subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=10:duration=2",
                    "-pix_fmt", "yuv420p", str(videos / "clip.mp4")], check=True)
    data = tmp_path / "data.json"
    docs = [{"source_task": "t", "video_id": "clip", "video_path": "clip.mp4", "question": f"q{i}?", "answer": "3",
             "choices": [], "answer_index": -1} for i in range(2)]
    data.write_text(json.dumps({"data": {"t": docs}}))
    since = str(int(time.time()) - 1)
    env = dict(os.environ, DOCKER_HOST=second_engine)
    proc = subprocess.run(
        [sys.executable, "-m", "statebox.cli", "run", "--agent", "shell", "--bench", "vstat", "--data", str(data),
         "--videos", str(videos), "--run-dir", str(tmp_path / "run"), "--option", "command=echo 3 > answer.txt", "--json"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)["results"][0]
    assert result["status_counts"] == {"ok": 2}
    assert result["metrics"]["score"] == pytest.approx(1.0)
    events = subprocess.run(
        ["docker", "-H", second_engine, "events", "--since", since, "--until", str(int(time.time()) + 1),
         "--filter", "type=container", "--filter", "event=start", "--format", "{{json .}}"],
        capture_output=True, text=True, timeout=30,
    )
    started = [json.loads(line) for line in events.stdout.splitlines() if line.strip()]
    assert len(started) >= 2, f"the second engine started {len(started)} containers: {events.stderr}"
