"""The `statebox run --streaming session` set-up shared by test_streaming_session.py (one host) and
test_streaming_session_cluster.py (one Ray node): a hand-made VCBench file over two short synthetic
videos, a shell agent that decodes every file in its workspace at each query point, and the checks
that read its report back (k cuts at the k-th question, no frame past the query time).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import docker

STATEBOX = [sys.executable, "-m", "statebox.cli"]
TIMES = (1.0, 2.0, 3.0)
ITEMS = {"q_alpha": "clip_a.mp4", "q_beta": "clip_b.mp4"}
TOLERANCE_S = 1e-3

# Inside the sandbox: decode every file there is (not only the ones named .mp4), report each
# file's last frame time, answer with the number of mp4 videos. SLOW_AT makes one point slow.
AGENT_SCRIPT = r"""
python3 - <<'PY'
import json, os, av
report, videos = {}, 0
for root, dirs, files in os.walk('.'):
    for name in files:
        path = os.path.join(root, name)
        try:
            with av.open(path) as c:
                if not c.streams.video:
                    continue
                last = max(f.time for f in c.decode(video=0))
                videos += "mp4" in c.format.name
        except Exception:
            continue
        report[path] = last
print("CUTS " + json.dumps({"files": report, "videos": videos}, sort_keys=True))
open("answer.txt", "w").write(str(videos))
PY
echo "ASKED $STATEBOX_QUESTION_FILE at $STATEBOX_QUERY_TIME"
cat "$STATEBOX_QUESTION_FILE"
if [ "$STATEBOX_QUERY_TIME" = "$SLOW_AT" ]; then sleep 6; fi
"""


def make_dataset(root: Path) -> tuple[Path, Path]:
    videos = root / "videos"
    videos.mkdir()
    for source, name in (("testsrc", "clip_a.mp4"), ("testsrc2", "clip_b.mp4")):
        subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", f"{source}=size=160x120:rate=10:duration=4",
                        "-pix_fmt", "yuv420p", str(videos / name)], check=True)
    rows = [{"id": qid, "query_index": i, "question": "How many squares have appeared so far?", "video_path": video,
             "counting_subtype": "O1-Snap", "query_time": t, "count": i + 1}
            for qid, video in ITEMS.items() for i, t in enumerate(TIMES)]
    data = root / "vcbench_eval.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data, videos


def session_command(data: Path, videos: Path, run_dir: Path, slow_at: str = "none", concurrency: int = 1) -> list[str]:
    script = AGENT_SCRIPT.replace("$SLOW_AT", slow_at)
    return STATEBOX + ["run", "--agent", "shell", "--bench", "vcbench", "--data", str(data), "--videos", str(videos),
                       "--streaming", "session", "--run-dir", str(run_dir), "--option", f"command={script}", "--json",
                       "-c", str(concurrency)]


def session_rows(run_dir: Path) -> dict[str, dict]:
    con = sqlite3.connect(run_dir / "results.sqlite")
    con.row_factory = sqlite3.Row
    rows = {r["attempt_id"]: dict(r) for r in con.execute("SELECT * FROM results")}
    con.close()
    return rows


def cuts_seen(run_dir: Path, attempt_id: str) -> dict:
    log = (run_dir / "attempts" / attempt_id / "stdout.log").read_text()
    line = next(l for l in log.splitlines() if l.startswith("CUTS "))
    return json.loads(line[len("CUTS "):])


class _CreateEvents:
    """Every container `create` event of the engine from the first call on, heard live.

    Why not ask the engine afterwards (`events(since, until)`): the daemon keeps only its last 256
    events, and with tests running side by side (pytest-xdist) other workers' containers push a
    run's creates out of that window before the test counts them (it counted 0 where 1 was made).
    A stream opened before the run misses nothing. One listener per test process, a daemon thread."""

    def __init__(self) -> None:
        self._seen: list[tuple[str, float]] = []  # (statebox.run label, time)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            client = docker.from_env()
            stream = client.api.events(decode=True, filters={"type": "container", "event": "create"})
            self._thread = threading.Thread(target=self._listen, args=(stream,), daemon=True, name="create-events")
            self._thread.start()

    def _listen(self, stream) -> None:
        for ev in stream:
            run = (ev.get("Actor") or {}).get("Attributes", {}).get("statebox.run")
            if run:
                with self._lock:
                    self._seen.append((run, ev.get("timeNano", 0) / 1e9))

    def count(self, run_id: str, since: float, until: float) -> int:
        time.sleep(1.0)  # a create's event reaches the stream a moment after the call that made it returned
        with self._lock:
            return sum(1 for run, at in self._seen if run == run_id and since <= at <= until)


_CREATES = _CreateEvents()


def listen_for_creates() -> None:
    """Start hearing creates (before the run whose containers a test counts); idempotent."""
    _CREATES.start()


def container_creates(run_id: str, since: float, until: float) -> int:
    """Containers the engine created for `run_id` between `since` and `until` (each event's own time,
    so a container a killed run created the second before `since` is not the resumed run's)."""
    return _CREATES.count(run_id, since, until)


def check_points(run_dir: Path, rows: dict[str, dict]) -> None:
    """Every row: k cuts at the k-th question, no frame past the query time in any file."""
    for qid in ITEMS:
        points = sorted((r for r in rows.values() if r["item_id"] == qid), key=lambda r: r["query_index"])
        assert [r["query_index"] for r in points] == [0, 1, 2]
        for k, row in enumerate(points, start=1):
            t = TIMES[k - 1]
            assert row["status"] == "ok", row["reason"]
            assert row["response"] == str(k), f"{qid} point {k}: the agent saw {row['response']} cuts"
            seen = cuts_seen(run_dir, row["attempt_id"])
            assert seen["videos"] == k
            last_frames = sorted(seen["files"].values())
            assert max(last_frames) <= t + TOLERANCE_S, f"{qid} point {k}: a frame at {max(last_frames)} s, asked at {t} s"
            video_ends = sorted(v for name, v in seen["files"].items() if name.endswith(".mp4"))
            assert len(video_ends) == k
            for j, end in enumerate(video_ends):  # one cut per earlier question, each ending just before its time
                assert TIMES[j] - 0.2 <= end <= TIMES[j] + TOLERANCE_S
