"""`statebox view`: a run folder served live, read-only, showing rows written after it started."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from tests.cli_deadline import run_statebox
from tests.conftest import default_signal_dispositions

STATEBOX = [sys.executable, "-m", "statebox.cli"]


@pytest.fixture(scope="module")
def small_run(tiny_suite, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("view") / "run"
    proc = subprocess.run(
        STATEBOX + ["run", "--agent", "oracle", "--suite", str(tiny_suite), "--run-dir", str(run_dir), "--epochs", "3", "--json"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


class Viewer:
    def __init__(self, run_dir: Path) -> None:
        self.proc = subprocess.Popen(
            STATEBOX + ["view", str(run_dir), "--port", "0", "--poll-ms", "300"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_signal_dispositions,
        )
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        m = re.search(r"(http://127\.0\.0\.1:(\d+)/)\?token=([\w-]+)", line)
        if not m:
            self.stop()
            raise AssertionError(f"no URL from statebox view: {line!r} {self.proc.stderr.read()[-2000:]}")  # type: ignore[union-attr]
        self.url = m.group(0)  # as printed: the page's address with its token
        self.base, self.port, self.token = m.group(1), int(m.group(2)), m.group(3)

    def path(self, path: str) -> str:
        """`path` (`api/rows?after=0`) as the page's script asks for it: with the token."""
        return path + ("&" if "?" in path else "?") + "token=" + self.token

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.base + self.path(path), timeout=60) as resp:
            return resp.read()

    def json(self, path: str):
        return json.loads(self.get(path))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _late_row(template, n: int):
    row = template.model_copy()
    row.attempt_id = f"late-agent-{n:04d}"
    row.agent = "late-agent"
    row.verdict = "contaminated" if n % 2 else "clean"
    row.action = "void" if n % 2 else "none"
    row.finished_at = time.time()
    return row


def test_view_shows_rows_written_after_it_started(small_run, tmp_path):
    from statebox.harness.store import ResultStore

    run_dir = tmp_path / "run"
    shutil.copytree(small_run, run_dir)
    store = ResultStore(run_dir)
    first = store.rows()
    store.close()
    before = {p.name for p in run_dir.iterdir()}
    viewer = Viewer(run_dir)
    try:
        status = viewer.json("api/status")
        assert status["rows"] == len(first) == status["total"] > 0  # the run is complete
        assert status["in_flight_count"] == 0
        page = viewer.get("").decode()
        assert "id='heatmap'" in page and "id='attempts'" in page and "live-status" in page
        rows = viewer.json("api/rows?after=0")
        assert len(rows["rows"]) == len(first)
        last = rows["last"]

        # the run goes on: an attempt starts (its folder, no row yet) and rows are written
        flying = run_dir / "attempts" / "oracle-inflight0001"
        flying.mkdir(parents=True)
        (flying / "attempt.json").write_text(json.dumps({"attempt": {"agent": "oracle", "dataset": "bolts"}, "item_id": "bolts_0000"}))
        (flying / "events.jsonl").write_text(json.dumps({"seq": 0, "kind": "message", "text": "still thinking"}) + "\n")
        writer = ResultStore(run_dir)
        for n in range(5):
            assert writer.add(_late_row(first[0], n))
        writer.close()

        status = viewer.json("api/status")
        assert status["rows"] == len(first) + 5
        assert [x["attempt_id"] for x in status["in_flight"]] == ["oracle-inflight0001"]
        assert status["in_flight"][0]["events"] == 1 and status["running"] is True
        new = viewer.json(f"api/rows?after={last}")
        assert [r[15] for r in new["rows"]] == [f"late-agent-{n:04d}" for n in range(5)]
        assert "late-agent" in new["vocab"]["agents"]
        assert {new["vocab"]["verdicts"][r[6]] for r in new["rows"]} == {"clean", "contaminated"}
        # an attempt still in flight opens too (its transcript so far)
        live = viewer.json("api/attempt?id=oracle-inflight0001")
        assert live["ev"][0]["text"] == "still thinking"
        done = viewer.json("api/attempt?id=" + first[0].attempt_id)
        assert [e["kind"] for e in done["ev"]][-1] == "final_answer" and "m" in done
        # the summary follows the rows: recomputed once they changed, at most every max(3 s, 5x its last cost), so
        # polled up to a deadline rather than read after a fixed sleep (under load one summary took over 0.64 s and
        # the next was not due at 3.2 s: CI)
        deadline = time.monotonic() + 60
        while "late-agent" not in (summary := viewer.get("fragment/summary").decode()) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert "late-agent" in summary
        assert viewer.json("api/search?q=still%20thinking")["ids"] == ["oracle-inflight0001"]
    finally:
        viewer.stop()
    # it only read the folder: nothing new beside the run but SQLite's own WAL index files
    after = {p.name for p in run_dir.iterdir()}
    assert after - before <= {"results.sqlite-wal", "results.sqlite-shm"}


def test_view_page_in_chromium_follows_the_run(small_run, tmp_path):
    """The page's own script polls the API: rows written after the view started appear, filtered by the hash."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium is not installed (scripts/setup/60-report-browser.sh installs it)")
    from statebox.harness.store import ResultStore

    run_dir = tmp_path / "run"
    shutil.copytree(small_run, run_dir)
    store = ResultStore(run_dir)
    first = store.rows()
    viewer = Viewer(run_dir)
    try:
        assert viewer.json("api/status")["rows"] == len(first)
        for n in range(7):  # written after the view started: the page gets every row from the API
            store.add(_late_row(first[0], n))
        out = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=8000", "--dump-dom",
             viewer.url + "#verdict=contaminated"],
            capture_output=True, text=True, timeout=180,
        ).stdout
    finally:
        store.close()
        viewer.stop()
    m = re.search(r'id="count" data-shown="(\d+)" data-total="(\d+)"', out)
    assert m, out[-2000:]
    assert int(m.group(2)) == len(first) + 7
    shown = re.findall(r'<tr class="arow[^"]*" data-idx="\d+" data-verdict="([a-z]+)"', out)
    assert shown == ["contaminated"] * 3 == ["contaminated"] * int(m.group(1))


def test_view_answers_only_requests_that_carry_its_token(small_run):
    """Any account or process on the machine can reach 127.0.0.1, and the page holds every answer, transcript and
    the benchmark's targets: without the printed token (or with another, or an old one) every path is 403, and
    nothing of the run is in the answer."""
    viewer = Viewer(small_run)
    try:
        page = viewer.get("").decode()
        assert "id='attempts'" in page and viewer.token in page  # the page's script sends it on
        for path in ("", "api/status", "api/rows?after=0", "fragment/summary", "api/search?q=a", "index.html"):
            for query in ("", "?token=", f"?token={viewer.token[:-1]}", f"?token={viewer.token}x", f"?other={viewer.token}"):
                try:
                    urllib.request.urlopen(viewer.base + path.split("?")[0] + query, timeout=60)
                except urllib.error.HTTPError as refused:
                    answer = json.loads(refused.read())
                    assert refused.code == 403 and list(answer) == ["error"] and "token" in answer["error"], (path, query)
                else:
                    raise AssertionError(f"{path}{query}: answered without the token")
    finally:
        viewer.stop()
    again = Viewer(small_run)  # a new start, a new token: the old address opens nothing
    try:
        assert again.token != viewer.token
        with pytest.raises(urllib.error.HTTPError, match="403"):
            urllib.request.urlopen(again.base + "api/status?token=" + viewer.token, timeout=60)
    finally:
        again.stop()


def test_view_refuses_a_folder_that_is_not_a_run(tmp_path):
    proc = subprocess.run(STATEBOX + ["view", str(tmp_path), "--port", "0"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "not a statebox run folder" in proc.stderr


def test_view_answers_only_to_loopback_names_and_says_why_it_refuses_an_attempt(small_run, tmp_path):
    """A page elsewhere that points a name of its own at 127.0.0.1 (DNS rebinding) sends that name as `Host`: refused,
    403, before anything is read. An attempt whose events.jsonl is a link (a handed-over run folder) is answered
    with the door's one line (422), not a dropped connection."""
    import http.client

    run_dir = tmp_path / "run"
    shutil.copytree(small_run, run_dir)
    events = sorted((run_dir / "attempts").glob("*/events.jsonl"))[0]
    secret = tmp_path / "secret.json"
    secret.write_text('{"seq": 1, "kind": "note", "text": "okapi-secret-3"}\n')
    events.unlink()
    events.symlink_to(secret)
    viewer = Viewer(run_dir)
    try:
        port = viewer.port

        def get(path: str, host: str) -> tuple[int, bytes]:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            try:
                conn.request("GET", path, headers={"Host": host})
                resp = conn.getresponse()
                return resp.status, resp.read()
            finally:
                conn.close()

        attempt = "/" + viewer.path(f"api/attempt?id={events.parent.name}")
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example", ""):
            status, body = get(attempt, host)
            assert status == 403 and b"okapi" not in body, (host, status)
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost"):
            status, body = get("/" + viewer.path("api/status"), host)
            assert status == 200, (host, status)
        status, body = get(attempt, f"127.0.0.1:{port}")
        assert status == 422 and b"symbolic link" in body and b"okapi" not in body, (status, body[:300])
        status, _ = get("/" + viewer.path(f"api/attempt?id={sorted((run_dir / 'attempts').glob('*/events.jsonl'))[1].parent.name}"),
                        f"127.0.0.1:{port}")
        assert status == 200
    finally:
        viewer.stop()


def test_sigusr1_prints_every_threads_stack_and_the_command_goes_on(small_run):
    """`kill -USR1` is where a long command is, not a stop: the stacks on stderr, the page still served."""
    viewer = Viewer(small_run)
    try:
        viewer.get("")
        viewer.proc.send_signal(signal.SIGUSR1)
        time.sleep(0.5)
        assert viewer.proc.poll() is None
        assert viewer.get("")  # still serving
    finally:
        viewer.stop()
    err = viewer.proc.stderr.read()  # type: ignore[union-attr]
    assert "most recent call first" in err and "statebox/" in err, err[-2000:]
    assert viewer.proc.returncode == 130  # the stop afterwards is the usual one


def test_a_command_past_its_deadline_fails_the_test_with_its_stacks(small_run):
    with pytest.raises(pytest.fail.Exception) as failed:
        run_statebox(["view", str(small_run), "--port", "0"], timeout=5)
    message = str(failed.value)
    assert "ran past 5 s" in message and "most recent call first" in message and "statebox/" in message, message[-3000:]
