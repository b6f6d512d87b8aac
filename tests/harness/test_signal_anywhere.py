"""A stop signal at any moment of `statebox sandbox run` and `statebox run`: always exit 128+N,
one line, no traceback, no container, no workspace left, and a store that is still whole.

Real engine, real CLI in a subprocess. The delays are measured from the moment statebox's
handlers are installed (read from /proc/PID/status, so the Python start-up before `install()`
is not part of the test) and spread over one calibration run's length, so the signals land
during image checks, workspace preparation, container create/attach/start, the start of the
engine's threads, the dispatch loop and the wait; the count is fixed, and nothing asserted
depends on the machine's speed (a slow machine only moves where each signal lands).
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.cli_deadline import catches
from tests.conftest import default_signal_dispositions

from signals_support import run_env, statebox_containers, vstat_dataset, workspaces_left

pytestmark = [pytest.mark.docker]

STATEBOX = [sys.executable, "-m", "statebox.cli"]
SIGNALS = [signal.SIGTERM, signal.SIGHUP, signal.SIGINT]
EXIT_TIMEOUT_S = 120


def _handlers_installed(pid: int) -> bool:
    """statebox's `install()` has run: SIGTERM and SIGHUP are caught (Python catches SIGINT from the start)."""
    return all(catches(pid, s) for s in (signal.SIGTERM, signal.SIGHUP))


def _start(args: list[str], env: dict) -> tuple[subprocess.Popen, float]:
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            env=env, preexec_fn=default_signal_dispositions)
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    while not _handlers_installed(proc.pid):
        if proc.poll() is not None:
            pytest.fail(f"statebox ended before installing its handlers: {proc.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("statebox never installed its signal handlers")
        time.sleep(0.005)
    return proc, time.monotonic()


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=EXIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"statebox did not exit after the signal: {err[-2000:]}")
    return proc.returncode, err


def _calibrate(args: list[str], env: dict) -> float:
    """Seconds from the handlers' installation to the end of a run that finishes by itself."""
    proc, ready = _start(args, env)
    rc, err = _finish(proc)
    assert rc == 0, err[-2000:]
    return time.monotonic() - ready


def _delays(span: float, count: int) -> list[float]:
    """`count` delays from 0 to a little past `span`, denser at the start (the container start)."""
    return [round(span * 1.1 * (i / (count - 1)) ** 1.5, 3) for i in range(count)]


def _mounts_under(root: Path) -> list[str]:
    return [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines() if str(root) in line.split()[1]]


def _assert_clean_stop(rc: int, err: str, sig: signal.Signals, pid: int, ws_root: Path, what: str) -> None:
    assert rc == 128 + sig, f"{what}: exit {rc}: {err[-2000:]}"
    assert "Traceback" not in err, f"{what}: {err[-3000:]}"
    # `sandbox run` says what it does on stderr ("[sandbox] ... is up to date"); nothing else may be there
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("[sandbox] ")]
    assert len(lines) == 1 and err.strip().splitlines()[-1] == lines[0] and lines[0].startswith(f"statebox: stopped by {sig.name}; containers removed"), f"{what}: {err}"
    assert statebox_containers(pid=str(pid)) == [], what
    assert workspaces_left(ws_root.parent) == [], what
    assert _mounts_under(ws_root) == [], what


def test_a_signal_at_any_moment_of_sandbox_run_stops_it_cleanly(tmp_path, docker_engine):
    video = tmp_path / "clip.mp4"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=5:duration=1",
                    "-pix_fmt", "yuv420p", str(video)], check=True)
    env = run_env(tmp_path)
    ws_root = tmp_path / "ws-root"
    base = STATEBOX + ["sandbox", "run", "--video", str(video), "--question", "q?", "--"]
    span = _calibrate(base + ["true"], env)
    for i, delay in enumerate(_delays(span, 12)):
        sig = SIGNALS[i % len(SIGNALS)]
        proc, ready = _start(base + ["sleep", "1000"], env)
        time.sleep(max(0.0, ready + delay - time.monotonic()))
        proc.send_signal(sig)
        rc, err = _finish(proc)
        _assert_clean_stop(rc, err, sig, proc.pid, ws_root, f"{sig.name} {delay:.2f}s after the handlers (span {span:.2f}s)")


def _store_whole(run_dir: Path) -> int:
    """The rows kept: the store opens and passes SQLite's integrity check (0 rows when none was made)."""
    path = run_dir / "results.sqlite"
    if not path.exists():
        return 0
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        try:
            return con.execute("SELECT count(*) FROM results").fetchone()[0]
        except sqlite3.OperationalError:
            return 0
    finally:
        con.close()


def test_a_signal_at_any_moment_of_run_stops_it_cleanly(tmp_path, docker_engine):
    data, videos = vstat_dataset(tmp_path, ["fast one?", "slow one?", "slow two?"])
    env = run_env(tmp_path)
    ws_root = tmp_path / "ws-root"

    def args(run_dir: Path, command: str) -> list[str]:
        return STATEBOX + ["run", "--agent", "shell", "--bench", "vstat", "--data", str(data), "--videos", str(videos),
                           "--concurrency", "2", "--run-dir", str(run_dir), "--option", f"command={command}"]

    span = _calibrate(args(tmp_path / "calibration", "echo 3 > answer.txt"), env)
    # the first item answers at once, the others wait: rows, in-flight attempts and queued ones at once
    command = "if grep -q slow instruction.txt; then sleep 1000; fi; echo 3 > answer.txt"
    for i, delay in enumerate(_delays(span, 9)):
        sig = SIGNALS[i % len(SIGNALS)]
        run_dir = tmp_path / f"run-{i}"
        proc, ready = _start(args(run_dir, command), env)
        time.sleep(max(0.0, ready + delay - time.monotonic()))
        proc.send_signal(sig)
        rc, err = _finish(proc)
        what = f"{sig.name} {delay:.2f}s after the handlers (span {span:.2f}s)"
        _assert_clean_stop(rc, err, sig, proc.pid, ws_root, what)
        rows = _store_whole(run_dir)
        if (run_dir / "run.json").exists():
            run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
            assert statebox_containers(run=run_id) == [], what
        if "rows kept" in err:
            assert f"{rows} rows kept" in err, what
