"""`statebox run --streaming session` (VCBench online), end to end on the real engine.

A hand-made VCBench file: two items over two short synthetic videos, three query points
each (1 s, 2 s, 3 s). The sandboxed agent is the `shell` agent (one container per item,
the command exec'd at each point); its script decodes EVERY file in the workspace with
PyAV at every question and prints the last frame time of each, and answers with the
number of video cuts it sees. So the store rows prove k cuts at the k-th question, and
the logs prove no frame after the query time ever existed in the workspace.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from streaming_session_support import (
    ITEMS,
    STATEBOX,
    check_points,
    container_creates,
    listen_for_creates,
    make_dataset,
    session_command,
    session_rows,
)

pytestmark = [pytest.mark.docker]


def test_session_grows_the_video_one_cut_per_question_in_one_container(tmp_path, docker_engine):
    data, videos = make_dataset(tmp_path)
    run_dir = tmp_path / "run"
    listen_for_creates()  # before the run: the engine keeps only its last 256 events
    started = time.time()
    done = subprocess.run(session_command(data, videos, run_dir), capture_output=True, text=True, timeout=600)
    ended = time.time()
    assert done.returncode == 0, done.stderr[-2000:]
    payload = json.loads(done.stdout)
    assert payload["results"][0]["n"] == 2 and "gpa" in payload["results"][0]["metrics"]
    rows = session_rows(run_dir)
    assert len(rows) == 6
    check_points(run_dir, rows)
    # the k-th question carries the earlier questions and answers
    second = next(r for r in rows.values() if r["item_id"] == "q_alpha" and r["query_index"] == 1)
    log = (run_dir / "attempts" / second["attempt_id"] / "stdout.log").read_text()
    assert "ASKED question_2.txt at 2" in log and "-> your answer: 1" in log
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    assert json.loads((run_dir / "run.json").read_text())["streaming"] == "session"
    assert container_creates(run_id, started, ended) == len(ITEMS)  # one container per video, not per point


def test_session_resumes_after_sigkill_at_the_next_query_point(tmp_path, docker_engine):
    data, videos = make_dataset(tmp_path)
    run_dir = tmp_path / "killed"
    cmd = session_command(data, videos, run_dir, slow_at="2")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 240
    stored: dict[str, dict] = {}
    while time.time() < deadline and proc.poll() is None:
        if (run_dir / "results.sqlite").exists():
            try:
                stored = session_rows(run_dir)
            except sqlite3.OperationalError:
                stored = {}
        if len(stored) == 1 and len(list((run_dir / "attempts").iterdir())) == 2:
            break  # the first point is stored, the second (slow) one is in flight
        time.sleep(0.2)
    assert proc.poll() is None, f"the run ended before the kill: {proc.stderr.read().decode()[-2000:]}"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = session_rows(run_dir)
    assert len(kept) == 1
    (first_id, first_row), = kept.items()
    assert first_row["item_id"] == "q_alpha" and first_row["query_index"] == 0
    first_log = (run_dir / "attempts" / first_id / "stdout.log")
    first_bytes, first_mtime = first_log.read_bytes(), first_log.stat().st_mtime_ns

    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    listen_for_creates()  # before the run: the engine keeps only its last 256 events
    started = time.time()
    resumed = subprocess.run(STATEBOX + ["run", "--resume", str(run_dir), "--json"], capture_output=True, text=True,
                             timeout=600)
    ended = time.time()
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    rows = session_rows(run_dir)
    assert len(rows) == 6
    assert rows[first_id] == first_row  # the stored point was not asked again
    assert first_log.read_bytes() == first_bytes and first_log.stat().st_mtime_ns == first_mtime
    check_points(run_dir, rows)  # the resumed point 2 still sees 2 cuts (point 1's cut re-made)
    second = next(r for r in rows.values() if r["item_id"] == "q_alpha" and r["query_index"] == 1)
    log = (run_dir / "attempts" / second["attempt_id"] / "stdout.log").read_text()
    assert "-> your answer: 1" in log  # point 1's answer, from the store, in the resumed prompt
    # a new container for the rest of q_alpha, one for q_beta; nothing left running
    assert container_creates(run_id, started, ended) == len(ITEMS)
    import docker

    client = docker.from_env()
    try:
        assert client.containers.list(all=True, filters={"label": [f"statebox.run={run_id}"]}) == []
    finally:
        client.close()


def test_sigterm_mid_session_keeps_the_answered_points_and_removes_every_container(tmp_path, docker_engine):
    data, videos = make_dataset(tmp_path)
    run_dir = tmp_path / "stopped"
    env = dict(os.environ, STATEBOX_WORKSPACE_ROOT=str(tmp_path / "ws"))
    proc = subprocess.Popen(session_command(data, videos, run_dir, slow_at="2", concurrency=2), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        try:
            stored = session_rows(run_dir) if (run_dir / "results.sqlite").exists() else {}
        except sqlite3.OperationalError:
            stored = {}
        if len(stored) == 2 and len(list((run_dir / "attempts").iterdir())) == 4:
            break  # both items' first points stored, both second (slow) points in flight
        time.sleep(0.2)
    assert proc.poll() is None, f"the run ended before the signal: {proc.stderr.read()[-2000:]}"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1].startswith("statebox: stopped by SIGTERM; containers removed") and "2 rows kept" in lines[-1], err
    rows = session_rows(run_dir)
    assert sorted((r["item_id"], r["query_index"]) for r in rows.values()) == [("q_alpha", 0), ("q_beta", 0)]
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    import docker

    client = docker.from_env()
    try:
        assert client.containers.list(all=True, filters={"label": [f"statebox.run={run_id}"]}) == []
    finally:
        client.close()
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(tmp_path / "ws") not in mounts  # every session workspace (tmpfs and video binds) unmounted
