"""A run killed with SIGKILL mid-way resumes to exactly the rows of an uninterrupted run.

Real engine, real sandboxes: the trivial `shell` agent answers from inside a
hardened container, four at a time, so attempts are genuinely in flight when
the kill lands.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker]

STATEBOX = [sys.executable, "-m", "statebox.cli"]
N_ITEMS = 30


def _make_dataset(root: Path) -> tuple[Path, Path]:
    videos = root / "videos"
    videos.mkdir()
    for k in range(3):
        subprocess.run(
            ["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", f"testsrc=size=160x120:rate=10:duration={2 + k}",
             "-pix_fmt", "yuv420p", str(videos / f"clip_{k}.mp4")],
            check=True,
        )
    docs = [
        {"source_task": "count", "video_id": f"clip_{i % 3}", "video_path": f"clip_{i % 3}.mp4",
         "question": f"How many squares are there (variant {i})?", "answer": str(3 + i % 2), "choices": [], "answer_index": -1}
        for i in range(N_ITEMS)
    ]
    data = root / "vstat_qa_clean.json"
    data.write_text(json.dumps({"data": {"count": docs}}))
    return data, videos


def _command(data: Path, videos: Path, run_dir: Path) -> list[str]:
    return STATEBOX + [
        "run", "--agent", "shell", "--bench", "vstat", "--data", str(data), "--videos", str(videos),
        "--concurrency", "4", "--run-dir", str(run_dir), "--option", "command=echo 3 > answer.txt", "--json",
    ]


def _rows(run_dir: Path) -> list[tuple]:
    con = sqlite3.connect(run_dir / "results.sqlite")
    rows = con.execute("SELECT attempt_id, item_id, status, response, metrics FROM results ORDER BY attempt_id").fetchall()
    con.close()
    return rows


def test_sigkill_mid_run_then_resume_matches_uninterrupted_run(tmp_path, docker_engine):
    data, videos = _make_dataset(tmp_path)
    killed = tmp_path / "killed"
    proc = subprocess.Popen(_command(data, videos, killed), stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 240
    done = 0
    while time.time() < deadline:
        if (killed / "results.sqlite").exists():
            try:
                done = len(_rows(killed))
            except sqlite3.OperationalError:
                done = 0
        if done >= 8 or proc.poll() is not None:
            break
        time.sleep(0.2)
    assert proc.poll() is None, f"the run finished before it could be killed: {proc.stderr.read().decode()[-2000:]}"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = _rows(killed)
    print(f"killed after {len(partial)} of {N_ITEMS} attempts were stored")
    assert 8 <= len(partial) < N_ITEMS

    resumed = subprocess.run(STATEBOX + ["run", "--resume", str(killed), "--json"], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    payload = json.loads(resumed.stdout)
    assert payload["results"][0]["n"] == N_ITEMS

    fresh = tmp_path / "fresh"
    clean = subprocess.run(_command(data, videos, fresh), capture_output=True, text=True, timeout=600)
    assert clean.returncode == 0, clean.stderr[-2000:]

    after, reference = _rows(killed), _rows(fresh)
    assert len(after) == N_ITEMS and len({r[0] for r in after}) == N_ITEMS  # no duplicates
    assert after == reference  # same attempt ids, answers and scores
    assert all(r[2] == "ok" and r[3] == "3" for r in after)
    # the resumed run cleaned up the containers the killed one left behind
    run_id = json.loads((killed / "run.json").read_text())["run_id"]
    leftovers = docker_engine_client_containers(run_id)
    assert leftovers == [], f"stale statebox containers left: {leftovers}"


def docker_engine_client_containers(run_id: str) -> list[str]:
    import docker

    client = docker.from_env()
    try:
        found = client.containers.list(all=True, filters={"label": ["statebox=1", f"statebox.run={run_id}"]})
        return [c.name for c in found]
    finally:
        client.close()
