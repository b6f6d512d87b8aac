"""`statebox view RUN_DIR`: the report, served on localhost while the run is still going.

Why a server and not a re-written file: a run in progress changes every second; the page
polls small JSON endpoints (progress, rows written since the last poll, attempts in
flight) and opens transcripts straight from the attempt folders, even of attempts still
running. It only ever reads the run folder: SQLite is opened read-only
(`file:...?mode=ro`, per request), nothing is written beside the run, no run lock is
taken, so it never gets in the way of the run it watches.

Who may ask: a request that names this server by a loopback name (`Host`, against DNS rebinding) and carries
the token the command printed (`?token=`, as Jupyter's server asks for one): the page holds every answer and the
benchmark's targets, and any other account or process on a shared machine can reach 127.0.0.1. The page's own
script adds the token to each request it makes.

Endpoints (all GET): `/` the page; `/fragment/summary` the part above the attempt table
(recomputed when rows were added, at most every few seconds); `/api/status`;
`/api/rows?after=ROWID`; `/api/attempt?id=ATTEMPT_ID`; `/api/search?q=TEXT` (attempts
whose transcript contains TEXT).
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from statebox.attempt_folder import (ATTEMPTS_DIR, ATTEMPT_FILE, EVENTS_FILE, SESSION_FILE, is_attempt_name,
                                     open_attempt_file, read_attempt_file)
from statebox.page_policy import NOTHING_RUNS
from statebox.report.page import ATTEMPTS_SECTION, PAGE_POLICY, page_head, page_meta, page_tail, summary_html
from statebox.report.data import (
    COLUMNS,
    DatasetInfo,
    ReportPass,
    RunSummary,
    Vocab,
    encode_transcript,
    connect_readonly,
    count_rows,
    iter_rows,
    js_json,
    load_run_datasets,
    read_transcript,
    row_from_tuple,
    summarise,
)
from statebox.harness.plan import RunConfig
from statebox.harness.store import RESULTS_FILE
from statebox.errors import UserError

ROWS_PER_POLL = 5000
_LOOPBACK_NAMES = frozenset(("127.0.0.1", "localhost", "[::1]"))
IN_FLIGHT_LISTED = 50
SUMMARY_MIN_INTERVAL_S = 3.0
SEARCH_LIMIT_S = 10.0


class LiveRun:
    """What the server knows about one run folder; every read goes to disk again."""

    def __init__(self, run_dir: Path, poll_ms: int = 2000) -> None:
        self.run_dir = Path(run_dir)
        self.poll_ms = poll_ms
        self.config = RunConfig.load(self.run_dir)
        self.datasets: list[DatasetInfo] = load_run_datasets(self.run_dir)
        self.totals = self._planned_totals()
        self._lock = threading.Lock()
        self._index = ReportPass(self.run_dir, self.datasets)  # its vocabularies number the rows' names
        self._done: set[str] = set()
        self._done_by_agent: dict[str, int] = {}
        self._done_rowid = 0
        self._summary: tuple[int, float, str] | None = None
        self._summary_lock = threading.Lock()
        self._summary_cost = 0.0

    def _planned_totals(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for agent in self.config.agents:
            cap = self.config.agent_limits.get(agent)
            n = 0
            for d in self.datasets:
                items = d.items[:cap] if cap is not None else d.items
                n += sum(len(i.queries) for i in items)
            totals[agent] = n * self.config.epochs
        return totals

    def _connect(self):
        if not (self.run_dir / RESULTS_FILE).exists():
            return None
        return connect_readonly(self.run_dir)

    # ------------------------------------------------------------ endpoints
    def status(self) -> dict[str, Any]:
        conn = self._connect()
        rows = last = 0
        if conn is not None:
            try:
                rows, last = count_rows(conn)
                with self._lock:
                    if last > self._done_rowid:
                        for rowid, attempt_id, agent in conn.execute(
                            "SELECT rowid, attempt_id, agent FROM results WHERE rowid > ?", (self._done_rowid,)
                        ):
                            if attempt_id not in self._done:
                                self._done.add(attempt_id)
                                self._done_by_agent[agent] = self._done_by_agent.get(agent, 0) + 1
                            self._done_rowid = max(self._done_rowid, rowid)
            finally:
                conn.close()
        flight = self._in_flight()
        total = sum(self.totals.values())
        with self._lock:
            by_agent = {a: {"done": self._done_by_agent.get(a, 0), "total": t} for a, t in self.totals.items()}
            for a, n in self._done_by_agent.items():
                by_agent.setdefault(a, {"done": n, "total": n})
        return {
            "run_dir": str(self.run_dir),
            "rows": rows,
            "last_rowid": last,
            "done": rows,
            "total": max(total, rows),
            "agents": by_agent,
            "in_flight": flight[:IN_FLIGHT_LISTED],
            "in_flight_count": len(flight),
            "running": bool(flight),
            "time": time.time(),
        }

    def _in_flight(self) -> list[dict[str, Any]]:
        """Attempt folders with no store row and no final session.json: started, not finished."""
        attempts = self.run_dir / ATTEMPTS_DIR
        out: list[dict[str, Any]] = []
        if not attempts.is_dir():
            return out
        now = time.time()
        with self._lock:
            done = set(self._done) if len(self._done) < 200_000 else self._done
        with os.scandir(attempts) as it:
            for entry in it:
                if entry.name in done or not entry.is_dir():
                    continue
                folder = Path(entry.path)
                if (folder / SESSION_FILE).exists():
                    continue  # finished; its row is being written
                info: dict[str, Any] = {"attempt_id": entry.name}
                try:
                    meta = json.loads(read_attempt_file(str(folder / ATTEMPT_FILE)))
                    info.update(agent=meta.get("attempt", {}).get("agent"), item_id=meta.get("item_id"),
                                dataset=meta.get("attempt", {}).get("dataset"))
                except (OSError, ValueError, UserError):  # a link or FIFO there is refused by the door: not shown
                    pass
                try:
                    with open_attempt_file(folder / EVENTS_FILE) as fh:
                        info["events"] = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 16), b""))
                except (OSError, UserError):
                    info["events"] = 0
                try:
                    info["age_s"] = now - entry.stat().st_mtime
                except OSError:
                    info["age_s"] = 0.0
                out.append(info)
        out.sort(key=lambda x: -x.get("age_s", 0))
        return out

    def rows_after(self, after: int) -> dict[str, Any]:
        conn = self._connect()
        rows: list[list[Any]] = []
        last = after
        if conn is not None:
            try:
                with self._lock:
                    for rowid, row in iter_rows(conn, order="rowid", after_rowid=after, limit=ROWS_PER_POLL):
                        rows.append(self._index.index_row(-1, row, None))
                        last = rowid
            finally:
                conn.close()
        with self._lock:
            vocab = {
                "agents": list(self._index.agents.names),
                "datasets": list(self._index.dataset_vocab.names),
                "verdicts": list(self._index.verdicts.names),
                "statuses": list(self._index.statuses.names),
                "actions": list(self._index.actions.names),
            }
        return {"rows": rows, "last": last, "vocab": vocab, "more": len(rows) >= ROWS_PER_POLL}

    def attempt(self, attempt_id: str) -> dict[str, Any] | None:
        if not is_attempt_name(attempt_id):
            return None
        folder = self.run_dir / ATTEMPTS_DIR / attempt_id
        transcript = read_transcript(folder)
        conn = self._connect()
        if conn is not None:
            try:
                raw = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM results WHERE attempt_id = ?", (attempt_id,)).fetchone()
            finally:
                conn.close()
            if raw is not None:
                return json.loads(encode_transcript(transcript, row_from_tuple(raw)))
        if transcript.get("missing"):
            return None
        return json.loads(encode_transcript(transcript, None))

    def search(self, query: str) -> dict[str, Any]:
        """Attempts whose events.jsonl contains `query` (case-insensitive), within a time limit."""
        needle = query.lower().encode()
        ids: list[str] = []
        started = time.time()
        complete = True
        attempts = self.run_dir / ATTEMPTS_DIR
        if needle and attempts.is_dir():
            with os.scandir(attempts) as it:
                for entry in it:
                    if time.time() - started > SEARCH_LIMIT_S:
                        complete = False
                        break
                    try:
                        if needle in read_attempt_file(os.path.join(entry.path, EVENTS_FILE)).lower():
                            ids.append(entry.name)
                    except (OSError, UserError):  # missing, or refused by the door (a link, a FIFO)
                        continue
        return {"ids": ids, "complete": complete}

    def summary(self) -> str:
        """The part above the attempt table, recomputed only when rows were added."""
        conn = self._connect()
        n = 0
        if conn is not None:
            try:
                n = count_rows(conn)[1]
            finally:
                conn.close()
        with self._summary_lock:
            cached = self._summary
            # a big run's summary takes seconds: recompute at most every 5x what the last one took
            wait = max(SUMMARY_MIN_INTERVAL_S, 5 * self._summary_cost)
            if cached is not None and (cached[0] == n or time.time() - cached[1] < wait):
                return cached[2]
            started = time.time()
            if conn is None:
                summary = RunSummary([], 0, self.datasets, {}, {}, Vocab(), Vocab(), Vocab(), Vocab(), Vocab())
            else:
                summary = summarise(self.run_dir, self.datasets)
            text = summary_html(summary)
            self._summary = (n, time.time(), text)
            self._summary_cost = time.time() - started
            return text

    def page(self, token: str) -> str:
        meta = page_meta(None, self.datasets, live=True, poll_ms=self.poll_ms, summary_rows=-1, token=token)
        subtitle = (f"live view of <code>{self.run_dir}</code> · agents: {', '.join(self.config.agents)} · "
                    f"{self.config.epochs} epoch(s) · reads the run folder only")
        return (
            page_head(f"statebox live · {self.run_dir.name}", subtitle)
            + "<h2>Progress</h2><div id='live-status'><p>connecting…</p></div>\n"
            + "<div id='summary'>" + self.summary() + "</div>\n"
            + ATTEMPTS_SECTION
            + f"<script type='application/json' id='sb-meta'>{js_json(meta)}</script>\n"
            + page_tail()
        )


def make_handler(live: LiveRun, token: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "statebox-view"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet by default
            return

        def _send(self, body: bytes, content_type: str, status: HTTPStatus = HTTPStatus.OK,
                  policy: str = NOTHING_RUNS) -> None:
            """Every answer carries a policy (the page's own: its script alone; any other: nothing runs, for an
            answer opened on its own, such as the summary fragment) and `nosniff` (a JSON answer holding markup is
            never read as a page)."""
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Security-Policy", policy)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, payload: Any, status: HTTPStatus = HTTPStatus.OK) -> None:
            self._send(json.dumps(payload, default=str).encode(), "application/json", status)

        def _host_is_ours(self) -> bool:
            """Whether the request names this server by a loopback name (`Host: 127.0.0.1:PORT`, `localhost:PORT`).

            Why: a web page the user has open elsewhere can point a name of its own at 127.0.0.1 (DNS rebinding)
            and then read this server's answers as its own origin: the run's transcripts. Its requests carry its
            own name in `Host`; only the names that already mean this machine are answered (as Jupyter does)."""
            host = (self.headers.get("Host") or "").strip().lower()
            name = host.split("]", 1)[0] + "]" if host.startswith("[") else host.rsplit(":", 1)[0]  # `[::1]:8765`
            return name in _LOOPBACK_NAMES

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            url = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qs(url.query)
            if not self._host_is_ours():
                self._json({"error": "this server answers only to 127.0.0.1 or localhost"}, HTTPStatus.FORBIDDEN)
                return
            if not hmac.compare_digest((query.get("token") or [""])[0].encode(), token.encode()):
                self._json({"error": "this view answers only to the address `statebox view` printed (its token)"},
                           HTTPStatus.FORBIDDEN)
                return
            try:
                if url.path in ("/", "/index.html"):
                    self._send(live.page(token).encode(), "text/html; charset=utf-8", policy=PAGE_POLICY)
                elif url.path == "/fragment/summary":
                    self._send(live.summary().encode(), "text/html; charset=utf-8")
                elif url.path == "/api/status":
                    self._json(live.status())
                elif url.path == "/api/rows":
                    after = int((query.get("after") or ["0"])[0] or 0)
                    self._json(live.rows_after(after))
                elif url.path == "/api/attempt":
                    found = live.attempt((query.get("id") or [""])[0])
                    if found is None:
                        self._json({"error": "no such attempt"}, HTTPStatus.NOT_FOUND)
                    else:
                        self._json(found)
                elif url.path == "/api/search":
                    self._json(live.search((query.get("q") or [""])[0]))
                else:
                    self._json({"error": "not found"}, HTTPStatus.NOT_FOUND)
            except (BrokenPipeError, ConnectionResetError):
                pass
            except ValueError as exc:
                self._json({"error": str(exc)}, HTTPStatus.BAD_REQUEST)
            except UserError as exc:  # an attempt file the door refuses (a link, a FIFO): said, not a dropped connection
                self._json({"error": str(exc)}, HTTPStatus.UNPROCESSABLE_ENTITY)

    return Handler


def serve(run_dir: Path, port: int = 8765, host: str = "127.0.0.1", poll_ms: int = 2000,
          ready: Callable[[str], object] | None = None) -> None:
    """Serve until interrupted; `ready(url)` is called once listening, with the address that carries the token."""
    live = LiveRun(run_dir, poll_ms=poll_ms)
    token = secrets.token_urlsafe(24)  # a new one each start: an address printed before opens nothing now
    server = ThreadingHTTPServer((host, port), make_handler(live, token))
    server.daemon_threads = True
    url = f"http://{host}:{server.server_address[1]}/?token={token}"
    if ready is not None:
        ready(url)
    try:
        server.serve_forever(poll_interval=0.25)
    finally:
        server.server_close()
