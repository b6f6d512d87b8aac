"""SIGTERM / SIGHUP take the same clean way out as Ctrl-C, and one run folder has one writer.

Real engine, real CLI in a subprocess. Attempts that must be "in flight" wait inside
their container until the test releases them (`docker exec ... touch /tmp/go`), so no
test depends on how fast the machine is; every wait is a generous poll.
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
from tests.conftest import default_signal_dispositions

from signals_support import run_env, statebox_containers, vstat_dataset, workspaces_left

pytestmark = [pytest.mark.docker]

STATEBOX = [sys.executable, "-m", "statebox.cli"]
# items whose question says "slow" wait for /tmp/go inside their container; the others answer at once
WAIT_FOR_GO = "if grep -q slow instruction.txt; then while [ ! -e /tmp/go ]; do sleep 0.2; done; fi; echo 3 > answer.txt"
TIMEOUT_S = 300


def _run_args(data: Path, videos: Path, run_dir: Path, concurrency: int = 2) -> list[str]:
    return STATEBOX + ["run", "--agent", "shell", "--bench", "vstat", "--data", str(data), "--videos", str(videos),
                       "--concurrency", str(concurrency), "--run-dir", str(run_dir), "--option", f"command={WAIT_FOR_GO}"]


def _rows(run_dir: Path) -> list[str]:
    path = run_dir / "results.sqlite"
    if not path.exists():
        return []
    con = sqlite3.connect(path)
    try:
        return [r[0] for r in con.execute("SELECT attempt_id FROM results ORDER BY attempt_id")]
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()


def _poll(what: str, check, proc: subprocess.Popen | None = None, timeout: float = TIMEOUT_S):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = check()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"process ended (rc={proc.returncode}) while waiting for {what}: {err[-2000:]}")
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def _wait_exit(proc: subprocess.Popen) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the process did not exit after the signal: {err[-2000:]}")
    return proc.returncode, out, err


def _release(run_id: str) -> int:
    """Let every waiting attempt of the run finish."""
    released = 0
    for c in statebox_containers(run=run_id):
        try:
            c.exec_run(["touch", "/tmp/go"])
            released += 1
        except Exception:  # noqa: BLE001 - it may have just ended
            pass
    return released


def _run_id(run_dir: Path) -> str:
    return json.loads((run_dir / "run.json").read_text())["run_id"]


def _running(run_id: str, n: int):
    return lambda: len([c for c in statebox_containers(run=run_id) if c.status == "running"]) >= n


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_signal_to_sandbox_run_removes_container_and_workspace(tmp_path, docker_engine, sig):
    video = tmp_path / "clip.mp4"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=5:duration=1",
                    "-pix_fmt", "yuv420p", str(video)], check=True)
    proc = subprocess.Popen(STATEBOX + ["sandbox", "run", "--video", str(video), "--question", "q?", "--", "sleep", "1000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            env=run_env(tmp_path), preexec_fn=default_signal_dispositions)
    _poll("the sandbox container", lambda: [c for c in statebox_containers(pid=str(proc.pid)) if c.status == "running"], proc)
    assert workspaces_left(tmp_path), "the workspace should exist while the command runs"
    proc.send_signal(sig)
    rc, _, err = _wait_exit(proc)
    assert rc == 128 + sig, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == f"statebox: stopped by {sig.name}; containers removed"
    assert statebox_containers(pid=str(proc.pid)) == []
    assert workspaces_left(tmp_path) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_signal_to_run_stops_in_flight_keeps_rows_and_resume_finishes(tmp_path, docker_engine, sig):
    data, videos = vstat_dataset(tmp_path, ["fast one?", "slow one?", "slow two?"])
    run_dir = tmp_path / "run"
    env = run_env(tmp_path)
    proc = subprocess.Popen(_run_args(data, videos, run_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=default_signal_dispositions)
    _poll("the fast attempt's row", lambda: len(_rows(run_dir)) == 1, proc)
    run_id = _run_id(run_dir)
    _poll("two slow attempts in flight", _running(run_id, 2), proc)
    proc.send_signal(sig)
    rc, _, err = _wait_exit(proc)
    assert rc == 128 + sig, err
    assert "Traceback" not in err
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"statebox: stopped by {sig.name}; containers removed"), err
    assert "1 rows kept" in lines[0] and "--resume" in lines[0]
    assert statebox_containers(run=run_id) == []
    assert workspaces_left(tmp_path) == []
    rows = _rows(run_dir)
    assert len(rows) == 1  # the finished attempt's row is kept; the stopped ones are not rows
    stopped = [p.name for p in (run_dir / "attempts").iterdir() if p.name not in rows]
    assert len(stopped) == 2  # their half-written folders stay for resume to wipe

    resumed = subprocess.Popen(STATEBOX + ["run", "--resume", str(run_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
    deadline = time.time() + TIMEOUT_S
    while resumed.poll() is None and time.time() < deadline:
        _release(run_id)
        time.sleep(0.5)
    rc, _, err = _wait_exit(resumed)
    assert rc == 0, err[-2000:]
    after = _rows(run_dir)
    assert len(after) == 3 and len(set(after)) == 3 and set(rows) <= set(after)
    assert statebox_containers(run=run_id) == []


def test_second_process_on_a_run_folder_stops_with_the_holders_pid(tmp_path, docker_engine):
    data, videos = vstat_dataset(tmp_path, ["slow one?"])
    run_dir = tmp_path / "run"
    env = run_env(tmp_path)
    first = subprocess.Popen(_run_args(data, videos, run_dir, 1), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _poll("the run folder's run.json", lambda: (run_dir / "run.json").exists(), first)
    run_id = _run_id(run_dir)
    _poll("the first run's attempt in flight", _running(run_id, 1), first)
    attempt_dirs = sorted(p.name for p in (run_dir / "attempts").iterdir())

    for args in (_run_args(data, videos, run_dir, 1), STATEBOX + ["run", "--resume", str(run_dir)]):
        second = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
        assert second.returncode == 2, second.stderr
        lines = [l for l in second.stderr.splitlines() if l.strip()]
        assert len(lines) == 1 and "Traceback" not in second.stderr, second.stderr
        assert f"pid {first.pid}" in lines[0] and str(run_dir) in lines[0]
    # the second process touched nothing: the first's attempt is still running in its own folder
    assert sorted(p.name for p in (run_dir / "attempts").iterdir()) == attempt_dirs
    assert [c.status for c in statebox_containers(run=run_id)] == ["running"]

    _poll("the first run to finish", lambda: _release(run_id) >= 0 and first.poll() is not None)
    rc, _, err = _wait_exit(first)
    assert rc == 0, err[-2000:]
    again = subprocess.run(STATEBOX + ["run", "--resume", str(run_dir)], capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert len(_rows(run_dir)) == 1


def test_run_lock_is_exclusive_per_folder_and_reentrant_in_process(tmp_path):
    from statebox.harness.lock import RunFolderBusy, RunLock, hold_run_lock

    run_dir = tmp_path / "r"
    run_dir.mkdir()
    with hold_run_lock(run_dir) as held:
        info = json.loads((run_dir / ".lock").read_text())
        assert info["pid"] == os.getpid() and held.held
        with hold_run_lock(run_dir):  # the same process again: fine
            pass
        assert held.held
        code = ("import sys; from statebox.harness.lock import RunLock\n"
                "try:\n    RunLock(sys.argv[1], role='ray-head').acquire()\n"
                "except Exception as e:\n    print(e); sys.exit(2)\n")
        other = subprocess.run([sys.executable, "-c", code, str(run_dir)], capture_output=True, text=True, timeout=60)
        assert other.returncode == 2 and f"pid {os.getpid()}" in other.stdout
    other = subprocess.run([sys.executable, "-c", code, str(run_dir)], capture_output=True, text=True, timeout=60)
    assert other.returncode == 0, other.stdout + other.stderr
    assert not RunLock(run_dir).held
    assert issubclass(RunFolderBusy, Exception)
