"""The report's one pass over a run: read-only, streaming, bounded memory.

Why a streaming pass: a real evaluation has 10,000+ attempts with hundreds of events
each; holding the rows (or worse, the transcripts) in memory, or in one HTML page,
does not scale. The pass reads the store in (agent, dataset, epoch) order through a
read-only SQLite connection, so what it keeps is one epoch of one (agent, dataset)
plus per-(agent, dataset) accumulators: memory grows with agents x datasets (and the
dataset's items, which are loaded anyway), never with attempts or transcript size.
Everything per attempt (the attempt index and the transcripts) goes straight to a
`ChunkSink` on disk as it is read.

The store is opened with a `file:...?mode=ro` URI: the report and `statebox view`
never write to a run folder they read, never take its lock, and can read while a run
writes (WAL).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
import sqlite3
import urllib.parse
from json.encoder import encode_basestring as _encode_str
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, cast

import orjson

from statebox.attempt_folder import ATTEMPTS_DIR, EVENTS_FILE, RUN_CONFIG_FILE, open_attempt_file, read_attempt_file
from statebox.audits.findings_shown import shown_indexes
from statebox.collector import collector_paused
from statebox.report.aggregate import AgentDatasetScore, ScoreAccumulator, add_comparisons
from statebox.report.attribution import AttributionAccumulator, FailureAttribution, probe_parents
from statebox.errors import UserError
from statebox.harness.plan import RunConfig, load_datasets, trust_plan
from statebox.harness.store import RESULTS_FILE, ResultRow, check_store_file, decode_stored
from statebox.harness.trust import TrustPlan
from statebox.harness.trust_results import outcome_from_rows
from statebox.schema import Item
from statebox.userfiles import as_read_text

MAX_EVENTS_PER_ATTEMPT = 300
MAX_TEXT = 2000
MAX_LINE = 2600  # an events.jsonl line longer than this is parsed and shortened
MAX_INDEX_TEXT = 300  # the answer / reason as the attempt index holds them (the full text opens on demand)
ROWS_PER_INDEX_CHUNK = 5000
TRANSCRIPT_CHUNK_BYTES = 512 * 1024
TRANSCRIPT_CHUNK_ATTEMPTS = 400
# no chunk this report writes is larger (one chunk: up to TRANSCRIPT_CHUNK_BYTES, then one more attempt's 300 lines of
# at most MAX_LINE, and its row): a bigger file in the last report's folder is no chunk of ours and is not read whole
_MAX_CHUNK_BYTES = 64 * 1024 * 1024
CURVE_BINS = 6

REPORT_ORDER = "agent, dataset, epoch, item_id, query_index"
COLUMNS = tuple(ResultRow.model_fields)
assert COLUMNS[0] == "attempt_id"  # LiteRow names a row by its first value
VERDICT_ORDER = ("clean", "suspicious", "contaminated")


# ---------------------------------------------------------------- read-only store access


def connect_readonly(run_dir: Path) -> sqlite3.Connection:
    """The run's store, read-only (`mode=ro`); a folder without one is a user error."""
    path = Path(run_dir) / RESULTS_FILE
    if not path.exists():
        raise UserError(f"{run_dir}: not a statebox run folder (no {RESULTS_FILE})")
    check_store_file(path)  # a foreign or damaged file: one line, never a traceback
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
    return sqlite3.connect(uri, uri=True, timeout=30, check_same_thread=False)


def _loads(text: str | bytes) -> Any:
    """json.loads, through orjson (C, several times faster); what orjson refuses and the json
    module reads (NaN/Infinity, integers past 64 bits) goes the json module's way."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _dumps(payload: Any, default: Any = None) -> bytes:
    """Compact JSON as UTF-8 bytes, non-ASCII raw: `json.dumps(payload, ensure_ascii=False,
    separators=(",", ":"))` through orjson. Where orjson refuses (a non-str key, an integer past
    64 bits, a lone surrogate), the json module's ASCII text (the same JSON, non-ASCII escaped).
    Floats may be spelt differently (`3e-6` for `3e-06`) but read back as the same number."""
    try:
        return orjson.dumps(payload, default=default)
    except orjson.JSONEncodeError:
        return json.dumps(payload, separators=(",", ":"), default=default).encode("ascii")


_DECODED: dict[str, Any] = {}  # JSON column text -> its value (runs repeat the same metrics text)
_STORE = f"the result store ({RESULTS_FILE})"  # what a bad cell's line names


def _decode(text: str, attempt_id: object) -> Any:
    """The metrics column's value, decoded (and checked, `store.decode_stored`) once per distinct text (treat the
    result as read-only)."""
    found = _DECODED.get(text)
    if found is None:
        if len(_DECODED) >= 8192:
            _DECODED.clear()
        found = _DECODED[text] = decode_stored("metrics", text, attempt_id, _loads, _STORE)
    return found


class LiteRow:
    """A stored row as plain attributes (the names of `ResultRow`'s fields), without pydantic:
    the store validated it on the way in, and at 100k rows construction cost shows.

    `findings` and `metrics` are decoded once per distinct text (shared, read-only values);
    their stored JSON text stays in `findings_json` / `metrics_json` for splicing into the page."""

    __slots__ = COLUMNS + ("findings_json", "metrics_json")

    def __init__(self, values: tuple[Any, ...]) -> None:
        _assign(self, values)
        attempt_id = values[0]  # COLUMNS begins with attempt_id
        findings = self.findings_json = self.findings  # type: ignore[has-type]
        self.findings = [] if findings == "[]" else decode_stored("findings", findings, attempt_id, _loads, _STORE)
        metrics = self.metrics_json = self.metrics  # type: ignore[has-type]
        self.metrics = _decode(metrics, attempt_id) if metrics != "{}" else {}


def _make_assign() -> Any:
    """`self.a, self.b, ... = values` for every column, compiled once (a setattr loop costs 5x)."""
    namespace: dict[str, Any] = {}
    targets = ", ".join(f"self.{name}" for name in COLUMNS)
    exec(f"def _assign(self, values):\n    {targets}, = values\n", namespace)  # noqa: S102 - our own column names
    return namespace["_assign"]


_assign = _make_assign()


def row_from_tuple(values: tuple[Any, ...]) -> ResultRow:
    """A stored row (columns in `COLUMNS` order) with ResultRow's attributes, not re-validated: a `LiteRow`,
    read as the `ResultRow` it mirrors (its readers only read attributes)."""
    return cast(ResultRow, LiteRow(values))


def iter_rows(conn: sqlite3.Connection, *, order: str = REPORT_ORDER, after_rowid: int | None = None,
              limit: int | None = None) -> Iterator[tuple[int, ResultRow]]:
    """(rowid, row) one at a time from a cursor (never fetchall)."""
    sql = f"SELECT rowid, {', '.join(COLUMNS)} FROM results"
    params: list[Any] = []
    if after_rowid is not None:
        sql += " WHERE rowid > ?"
        params.append(after_rowid)
    sql += f" ORDER BY {order}"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    cursor = conn.execute(sql, params)
    try:
        while True:
            batch = cursor.fetchmany(512)
            if not batch:
                return
            for raw in batch:
                yield raw[0], row_from_tuple(raw[1:])
    finally:
        cursor.close()


def count_rows(conn: sqlite3.Connection) -> tuple[int, int]:
    """(number of rows, highest rowid): changes whenever a row is written."""
    n, top = conn.execute("SELECT COUNT(*), COALESCE(MAX(rowid), 0) FROM results").fetchone()
    return int(n), int(top)


class StoredRows:
    """The rows of a run, read again from the store each time it is iterated (for callers
    of `write_report` that look at rows, without the report holding them all)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)

    def __iter__(self) -> Iterator[ResultRow]:
        conn = connect_readonly(self.run_dir)
        try:
            for _, row in iter_rows(conn, order="agent, dataset, item_id, query_index, epoch"):
                yield ResultRow.model_construct(**{name: getattr(row, name) for name in COLUMNS})
        finally:
            conn.close()

    def __len__(self) -> int:
        conn = connect_readonly(self.run_dir)
        try:
            return count_rows(conn)[0]
        finally:
            conn.close()


# ---------------------------------------------------------------- transcripts


def read_transcript(attempt_dir: Path | str, max_events: int = MAX_EVENTS_PER_ATTEMPT, max_text: int = MAX_TEXT) -> dict[str, Any]:
    """The first `max_events` lines of `events.jsonl`, kept as the JSON text they are (`lines`);
    the rest is counted, not read into the report.

    Why raw lines: decoding and re-encoding every event was most of a big report's time.
    Each line is one JSON object written whole by the recorder; only a line that does not
    look like one (a torn last line, a killed writer) or is longer than `MAX_LINE` is parsed
    (and its text cut at `max_text`), so the page can splice the lines into its JSON as they are.
    """
    path = os.path.join(attempt_dir, EVENTS_FILE)
    try:
        text = as_read_text(read_attempt_file(path))  # through the door (a link or FIFO is one line, exit 2)
    except OSError:
        return {"lines": [], "more": 0, "missing": True}
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    n = len(lines)
    # one JSON object per line, each written whole: every boundary is "}\n{" (a JSON line holds
    # no raw newline, so this one C-speed count checks the lot)
    whole = bool(lines) and lines[0][:1] == "{" and text.count("}\n{") >= n - 1
    more = max(0, n - max_events)
    if more:
        lines = lines[:max_events]
    if lines:
        try:
            json.loads(lines[-1])  # the one line a killed writer can leave torn
        except json.JSONDecodeError:
            lines[-1] = json.dumps({"seq": None, "kind": "note", "text": "[torn last event line]"})
        if not whole or max(map(len, lines)) > MAX_LINE:
            lines = [
                line if len(line) <= MAX_LINE and line[:1] == "{" and line.rstrip()[-1:] == "}" else _shorten_event(line, max_text)
                for line in lines
            ]
    return {"lines": lines, "more": more}


def _shorten_event(line: str, max_text: int) -> str:
    """One over-long event line, its text cut and its data summarised (a torn line becomes a note)."""
    try:
        ev = json.loads(line)
    except json.JSONDecodeError:
        return json.dumps({"seq": None, "kind": "note", "text": f"[unreadable event line of {len(line)} chars]"})
    if not isinstance(ev, dict):
        return json.dumps({"seq": None, "kind": "note", "text": "[not an event]"})
    text = str(ev.get("text") or "")
    if len(text) > max_text:
        ev["text"] = text[:max_text] + f"… [{len(text) - max_text} more chars]"
    data = ev.get("data")
    if data:
        dumped = json.dumps(data)
        if len(dumped) > 400:
            ev["data"] = {"summary": dumped[:400] + "…"}
    return json.dumps(ev, ensure_ascii=False)


def encode_transcript(transcript: dict[str, Any], row: ResultRow | None) -> str:
    """The transcript plus the row's full answer, metrics and findings, as page-safe JSON
    (the event lines are spliced in as they are; no '<' anywhere, so it can sit in a <script>)."""
    head = (
        '{"ev":[' + ",".join(transcript.get("lines", ())) + "]"
        + ',"more":' + str(int(transcript.get("more", 0)))
        + (',"missing":true' if transcript.get("missing") else "")
    )
    if row is None:  # an attempt still in flight (live view): no row yet
        return (head + "}").replace("<", "\\u003c")
    return (head + "," + _row_tail(row)).replace("<", "\\u003c")


def _row_tail(row: Any) -> str:
    """`"resp":...,"m":...,"f":[...]}`: the stored metrics JSON text is spliced as it is
    (no decode/re-encode); findings are cut to what the page shows (`findings_shown`: `fm` says how many more the
    attempt's verdict holds)."""
    more = 0
    if row.findings:
        shown = [row.findings[i] for i in shown_indexes([(str(f.get("category")), str(f.get("severity")))
                                                          for f in row.findings])]
        more = len(row.findings) - len(shown)
        findings = _dumps([
            {k: (str(v)[:300] if k == "quote" else v) for k, v in f.items() if k in ("category", "severity", "event", "quote", "rule", "detail")}
            for f in shown
        ], default=str).decode()
    else:
        findings = "[]"
    metrics = getattr(row, "metrics_json", None)
    if not metrics or metrics[0] != "{" or "NaN" in metrics or "Infinity" in metrics:
        metrics = _dumps(row.metrics, default=str).decode()
    return f'"resp":{_encode_str(row.response[:MAX_TEXT])},"m":{metrics},"f":{findings},"fm":{more}}}'


# ---------------------------------------------------------------- chunk sink


def js_json_bytes(payload: Any) -> bytes:
    """JSON (UTF-8) that is also safe inside an HTML <script> block (no '<' at all)."""
    body = _dumps(payload)
    return body.replace(b"<", b"\\u003c") if b"<" in body else body


def js_json(payload: Any) -> str:
    """`js_json_bytes` as text."""
    return js_json_bytes(payload).decode()


_MISSING_EVENTS = b'{"ev":[],"more":0,"missing":true'
TRANSCRIPT_FORMAT = b"t2"  # part of every transcript chunk's key: bump when the encoding changes


def _events_json(path: str) -> bytes | None:
    """`{"ev":[...],"more":N` of an events.jsonl, as bytes spliced from the file in one go
    (no decode, no per-line work beyond one split). None when the file needs the careful
    path (`read_transcript`): a line that is not one whole object, a long line, a torn or
    surplus tail, text that is not UTF-8."""
    try:
        data = read_attempt_file(path)
    except OSError:
        return _MISSING_EVENTS
    body = data.rstrip()
    if not body:
        return b'{"ev":[],"more":0'
    if body[:1] != b"{" or body[-1:] != b"}" or b"\r" in body:
        return None
    lines = body.split(b"\n")
    n = len(lines)
    if n > MAX_EVENTS_PER_ATTEMPT or body.count(b"}\n{") != n - 1 or max(map(len, lines)) > MAX_LINE:
        return None
    try:
        body.decode("utf-8")
        json.loads(lines[-1])  # the one line a killed writer can leave torn
    except ValueError:
        return None
    return b'{"ev":[' + b",".join(lines) + b'],"more":0'


def _reusable_chunk(path: Path, name: str) -> bool:
    """Whether the last report's chunk `path` is exactly a chunk this report would write as `name`: a regular file
    (no link followed) holding `SB.chunk("name",` + one JSON value + `);`, with no `<` anywhere.

    Why: a chunk's name is a key of what it holds (attempt ids, events sizes and times), not of its bytes, and a
    run folder someone hands over keeps its last report's folder as they left it (a tarball keeps links and
    times). Reused unread, a chunk planted under the right name was a link to any file of the user's (copied into
    the new report's folder), a script run by the page, or a `</script>` breaking out of the inline block. A JSON
    value between that head and tail can only be data handed to `SB.chunk`; without `<` it cannot close the inline
    `<script>` (`js_json_bytes` writes none). The check reads the chunk once (no copy is made) through the attempt
    folder's door (no link followed, a regular file only); anything else is written afresh."""
    try:
        with open_attempt_file(path) as fh:
            if os.fstat(fh.fileno()).st_size > _MAX_CHUNK_BYTES:
                return False
            data = fh.read(_MAX_CHUNK_BYTES + 1)
    except (OSError, UserError):  # missing, or refused by the door (a link, a FIFO, a folder)
        return False
    head, tail = ChunkSink._wrap(name)
    if not (data.startswith(head) and data.endswith(tail)) or b"<" in data:
        return False
    try:
        orjson.loads(memoryview(data)[len(head): len(data) - len(tail)])
    except orjson.JSONDecodeError:
        return False
    return True


class ChunkSink:
    """Per-attempt data written to disk as it is produced: `i-NNNN` (the attempt index,
    rows of the filterable table) and `t-<key>` (transcripts, opened on demand).

    Each chunk is written once, as the script a split report loads (`SB.chunk("NAME", JSON);`);
    a single-file report copies the JSON part of each into an inline block (`inline_json`).

    Transcript chunks are keyed by what they hold: their attempts' ids, each events.jsonl's
    size and modification time, and the row details shown beside it. A chunk whose key is
    already in `previous` (the last report's folder) is linked from there, not written again,
    once it is read to be exactly such a chunk (`_reusable_chunk`: that folder may have come
    with a run someone handed over): a second report of an unchanged run copies no transcript
    and reads no events.jsonl. Chunks are cut
    at each (agent, dataset) and by the events files' sizes, so the same run cuts the same
    chunks. Inside a chunk, transcripts are keyed by attempt id (the page looks them up so).
    """

    def __init__(self, folder: Path, previous: Path | None = None) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.previous = Path(previous) if previous is not None and Path(previous).is_dir() else None
        self.index_chunks: list[str] = []
        self.transcript_chunks: list[str] = []
        self.bytes = 0
        self.reused = 0  # transcript chunks linked from the previous report
        self.reused_attempts = 0
        self.written_attempts = 0
        self.transcript_seconds = 0.0  # wall time in the transcript part (stat, read, encode, write, link)
        self._index: list[list[Any]] = []
        self._pending: list[tuple[str, str | None, str, str]] = []  # attempt id, events path, stat key, row tail
        self._present: set[str] | None = None  # the attempt folders (listed once)
        self._present_in: str | None = None
        self._p_bytes = 0
        self._group: tuple[str, str] | None = None

    @staticmethod
    def _wrap(name: str) -> tuple[bytes, bytes]:
        return f"SB.chunk({json.dumps(name)},".encode(), b");\n"

    def _write_bytes(self, name: str, body: bytes) -> None:
        head, tail = self._wrap(name)
        with open(self.folder / f"{name}.js", "wb") as fh:
            fh.write(head)
            fh.write(body)
            fh.write(tail)
        self.bytes += len(body)

    def _write_text(self, name: str, text: str) -> None:
        self._write_bytes(name, text.encode("utf-8"))

    def path(self, name: str) -> Path:
        return self.folder / f"{name}.js"

    def inline_json(self, name: str, out: Any) -> None:
        """Copy chunk NAME's JSON (without its script wrapper) to the binary stream `out`."""
        head, tail = self._wrap(name)
        path = self.path(name)
        left = path.stat().st_size - len(head) - len(tail)
        with open(path, "rb") as fh:
            fh.seek(len(head))
            while left > 0:
                block = fh.read(min(left, 1 << 20))
                if not block:
                    break
                out.write(block)
                left -= len(block)

    def _write(self, name: str, payload: Any) -> None:
        self._write_bytes(name, js_json_bytes(payload))

    @property
    def transcript_chunk(self) -> int:
        return len(self.transcript_chunks)

    def add_attempt(self, attempts: str, row: ResultRow, group: tuple[str, str] | None = None) -> int:
        """Queue one attempt's transcript; returns the number of the chunk that will hold it."""
        if group != self._group:
            self._flush_transcripts()
            self._group = group
        present = self._present
        if present is None or self._present_in != attempts:
            try:  # one listing instead of a failing stat per attempt without a folder
                present = self._present = set(os.listdir(attempts))
            except OSError:
                present = self._present = set()
            self._present_in = attempts
        path: str | None = None
        key, size = "-", 0
        if row.attempt_id in present:
            path = attempts + os.sep + row.attempt_id + os.sep + EVENTS_FILE
            try:
                st = os.lstat(path)  # a link is refused when read (`read_attempt_file`), never followed
                key, size = f"{st.st_size}:{st.st_mtime_ns}", min(st.st_size, MAX_EVENTS_PER_ATTEMPT * MAX_LINE)
            except OSError:
                path = None
        tail = _row_tail(row)
        self._pending.append((row.attempt_id, path, key, tail))
        self._p_bytes += size + len(tail)
        number = len(self.transcript_chunks)
        if self._p_bytes >= TRANSCRIPT_CHUNK_BYTES or len(self._pending) >= TRANSCRIPT_CHUNK_ATTEMPTS:
            self._flush_transcripts()
        return number

    def add_index(self, index_row: list[Any]) -> None:
        self._index.append(index_row)
        if len(self._index) >= ROWS_PER_INDEX_CHUNK:
            self._flush_index()

    def _flush_transcripts(self) -> None:
        if self._pending:
            started = time.perf_counter()
            self._write_transcripts(self._pending)
            self.transcript_seconds += time.perf_counter() - started

    def _write_transcripts(self, pending: list[tuple[str, str | None, str, str]]) -> None:
        digest = hashlib.blake2b(TRANSCRIPT_FORMAT, digest_size=12)
        for attempt_id, _, key, tail in pending:
            digest.update(f"{attempt_id}\0{key}\0{tail}\0".encode("utf-8", "surrogatepass"))
        name = "t-" + digest.hexdigest()
        self.transcript_chunks.append(name)
        self._pending, self._p_bytes = [], 0
        target = self.path(name)
        if self.previous is not None:
            old = self.previous / f"{name}.js"
            reused = _reusable_chunk(old, name)
            if reused:
                try:
                    os.link(old, target, follow_symlinks=False)
                except FileExistsError:
                    return
                except OSError:
                    shutil.copyfile(old, target, follow_symlinks=False)
            if reused:
                head, end = self._wrap(name)
                self.bytes += target.stat().st_size - len(head) - len(end)
                self.reused += 1
                self.reused_attempts += len(pending)
                return
        parts = []
        for attempt_id, path, _, tail in pending:
            if path is None:
                events = _MISSING_EVENTS
            else:
                fast = _events_json(path)
                # None: the careful path, parsed and shortened as `read_transcript` does
                events = (fast if fast is not None
                          else encode_transcript(read_transcript(os.path.dirname(path)), None)[:-1].encode("utf-8"))
            parts.append(b"%b:%b,%b" % (_encode_str(attempt_id).encode("utf-8"), events, tail.encode("utf-8")))
        body = b"{" + b",".join(parts) + b"}"
        self._write_bytes(name, body.replace(b"<", b"\\u003c") if b"<" in body else body)  # one escaping pass
        self.written_attempts += len(pending)

    def _flush_index(self) -> None:
        if self._index:
            name = f"i-{len(self.index_chunks):04d}"
            self._write(name, self._index)
            self.index_chunks.append(name)
            self._index = []

    def close(self) -> None:
        self._flush_transcripts()
        self._flush_index()

    def names(self) -> list[str]:
        return self.index_chunks + self.transcript_chunks


# ---------------------------------------------------------------- the pass


def _parse_int(text: str) -> int | None:
    found = re.findall(r"-?\d+", text or "")
    return int(found[-1]) if found else None


def target_text(value: Any) -> str:
    """A query's truth as one string (a count as an integer, a list comma-joined): the report's
    and the exports' (report/export/records.py) one spelling of it."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


class Vocab:
    """Grow-only string -> small int (the attempt index stores numbers, the page the names)."""

    def __init__(self, initial: tuple[str, ...] | list[str] = ()) -> None:
        self.names: list[str] = []
        self._ids: dict[str, int] = {}
        for name in initial:
            self.id(name)

    def id(self, name: str) -> int:
        found = self._ids.get(name)
        if found is None:
            found = self._ids[name] = len(self.names)
            self.names.append(name)
        return found


@dataclass
class DatasetInfo:
    label: str
    bench: str
    items: list[Item]
    positions: dict[str, int] = field(default_factory=dict)
    queries: dict[str, dict[int, Any]] = field(default_factory=dict)
    count_range: tuple[int, int] | None = None
    curve_edges: list[float] = field(default_factory=list)
    # (item id, query index) -> (count truth or None, curve bins the query time falls in), for plots
    plot: dict[tuple[str, int], tuple[int | None, tuple[int, ...]]] = field(default_factory=dict)
    # a failure-mode variant's parent id -> its probe items (report/attribution.py); empty otherwise
    probes: dict[str, list[Item]] = field(default_factory=dict)

    @classmethod
    def build(cls, label: str, bench: str, items: list[Item]) -> "DatasetInfo":
        info = cls(label=label, bench=bench, items=items, probes=probe_parents(items))
        counts: list[int] = []
        times: list[float] = []
        for pos, item in enumerate(items):
            info.positions[item.id] = pos
            info.queries[item.id] = {q.index: q for q in item.queries}
            for q in item.queries:
                if item.is_streaming and q.time is not None:
                    times.append(float(q.time))
                if item.answer_type == "number":
                    target = q.target if q.target is not None else item.target
                    try:
                        counts.append(int(float(target)))
                    except (TypeError, ValueError):
                        pass
        if counts:
            info.count_range = (min(counts), max(counts))
        if times:
            lo, hi = min(times), max(times)
            info.curve_edges = [lo + (hi - lo) * k / CURVE_BINS for k in range(CURVE_BINS + 1)]
        edges = info.curve_edges
        for item in items:
            number = item.answer_type == "number" and info.count_range is not None
            streaming = item.is_streaming and bool(edges)
            for q in item.queries:
                truth = None
                if number:
                    target = q.target if q.target is not None else item.target
                    try:
                        truth = int(float(target))
                    except (TypeError, ValueError):
                        truth = None
                bins: tuple[int, ...] = ()
                if streaming and q.time is not None:
                    t = float(q.time)
                    bins = tuple(k for k in range(CURVE_BINS) if edges[k] <= t <= edges[k + 1])
                info.plot[(item.id, q.index)] = (truth, bins)
        return info

    def item_table(self) -> list[list[Any]]:
        """What the page needs per item: id, question, labels, choices, {query: [time, target]}."""
        out = []
        for item in self.items:
            labels = sorted({f"{k}={part}" for k, v in item.labels.items() for part in str(v).split("|")})
            queries = {
                str(q.index): [q.time, target_text(q.target if q.target is not None else item.target)] for q in item.queries
            }
            out.append([item.id, item.question, labels, list(item.choices or []), queries])
        return out


@dataclass
class RunSummary:
    """Everything above the attempt table, bounded by agents x datasets."""

    scores: list[AgentDatasetScore]
    n_rows: int
    datasets: list[DatasetInfo]
    confusions: dict[tuple[str, str], Counter]
    curves: dict[str, dict[str, list[list[float]]]]
    agents: Vocab
    dataset_vocab: Vocab
    verdicts: Vocab
    statuses: Vocab
    actions: Vocab
    last_rowid: int = 0
    trust: Any = None  # harness/trust.py:TrustOutcome when the run mixed impossible items / twins in
    # per (agent, dataset) of a failure-mode variant: parents by first failing step (report/attribution.py)
    attribution: list[FailureAttribution] = field(default_factory=list)


class ReportPass:
    """Feed rows in (agent, dataset, epoch) order; `finish()` returns the summary.

    With a `sink`, every row also becomes one attempt-index row and one transcript
    (read from its attempt folder) on disk, as it goes.
    """

    def __init__(self, run_dir: Path, datasets: list[DatasetInfo], sink: ChunkSink | None = None,
                 trust_ids: frozenset[str] = frozenset(), source_ids: frozenset[str] = frozenset()) -> None:
        self.run_dir = Path(run_dir)
        # impossible items and twins (harness/trust.py): listed as attempts, never scored; their rows
        # and their twins' source rows are kept for the trust figures (bounded by the few trust items)
        self.trust_ids, self.source_ids = trust_ids, source_ids
        self.trust_rows: list[ResultRow] = []
        self.source_rows: list[ResultRow] = []
        self._attempts = str(self.run_dir / ATTEMPTS_DIR)
        self.datasets = {d.label: d for d in datasets}
        self.dataset_list = datasets
        self.sink = sink
        self.agents = Vocab()
        self.dataset_vocab = Vocab([d.label for d in datasets])
        self.verdicts = Vocab(VERDICT_ORDER)
        self.statuses = Vocab(("ok",))
        self.actions = Vocab(("none",))
        self.scores: list[AgentDatasetScore] = []
        self.confusions: dict[tuple[str, str], Counter] = defaultdict(Counter)
        self.curves: dict[str, dict[str, list[list[float]]]] = defaultdict(dict)
        self.n = 0
        self.last_rowid = 0
        self._group: tuple[str, str] | None = None
        self._acc: ScoreAccumulator | None = None
        self._epoch: int | None = None
        self._epoch_rows: list[ResultRow] = []
        self._attr: AttributionAccumulator | None = None
        self.attribution: list[FailureAttribution] = []
        self._parsed: dict[str, Any] = {}
        self._info_for: str | None = None
        self._group_ids: tuple[str, str, int, int] | None = None
        self._info: DatasetInfo | None = None

    # -- grouping
    def _flush_epoch(self) -> None:
        if self._acc is not None and self._epoch_rows:
            self._acc.add_epoch(self._epoch_rows)
            if self._attr is not None and self._epoch is not None:
                self._attr.add_epoch(self._epoch, self._epoch_rows)
        self._epoch_rows = []

    def _flush_group(self) -> None:
        self._flush_epoch()
        if self._acc is not None and self._acc.rows:
            self.scores.append(self._acc.result())
            if self._attr is not None:
                self.attribution.append(self._attr.result())
        self._acc = None
        self._attr = None

    def feed(self, row: ResultRow, rowid: int = 0) -> None:
        key = (row.agent, row.dataset)
        if key != self._group:
            self._flush_group()
            self._group = key
            info = self.datasets.get(row.dataset)
            self._acc = ScoreAccumulator(row.agent, row.dataset, row.bench, info.items if info else [])
            if info is not None and info.probes:
                self._attr = AttributionAccumulator(row.agent, row.dataset, info.probes)
            self._epoch = row.epoch
        elif row.epoch != self._epoch:
            self._flush_epoch()
            self._epoch = row.epoch
        if row.item_id in self.trust_ids:
            self.trust_rows.append(row)
        else:
            self._epoch_rows.append(row)
            if row.item_id in self.source_ids:
                self.source_rows.append(row)
        if rowid > self.last_rowid:
            self.last_rowid = rowid
        idx = self.n
        self.n += 1
        info = self._info if self._info_for == row.dataset else self._lookup(row.dataset)
        if info is not None:
            plot = info.plot.get((row.item_id, row.query_index))
            if plot is not None:
                self._plots(row, plot, info)
        if self.sink is not None:
            tchunk = self.sink.add_attempt(self._attempts, row, key)
            self.sink.add_index(self.index_row(idx, row, tchunk))

    def _lookup(self, dataset: str) -> DatasetInfo | None:
        self._info_for, self._info = dataset, self.datasets.get(dataset)
        return self._info

    def _parse_int(self, response: str) -> int | None:
        cache = self._parsed
        found = cache.get(response, cache)
        if found is cache:
            if len(cache) >= 8192:
                cache.clear()
            found = cache[response] = _parse_int(response)
        return found

    def _plots(self, row: ResultRow, plot: tuple[int | None, tuple[int, ...]], info: DatasetInfo) -> None:
        truth, bins = plot
        if truth is not None and info.count_range is not None:
            pred = self._parse_int(row.response)
            lo, hi = info.count_range
            if pred is not None and not lo - 11 <= pred <= hi + 11:
                pred = lo - 11 if pred < lo else hi + 11  # far out: one bucket each side keeps memory bounded
            self.confusions[(row.dataset, row.agent)][(truth, pred)] += 1
        if bins and row.metrics:
            value = row.metrics.get("gpa", next(iter(row.metrics.values())))
            if value is not None:
                curve = self.curves[row.dataset].get(row.agent)
                if curve is None:
                    curve = self.curves[row.dataset][row.agent] = [[0.0, 0] for _ in range(CURVE_BINS)]
                for k in bins:
                    curve[k][0] += float(value)
                    curve[k][1] += 1

    def index_row(self, idx: int, row: ResultRow, tchunk: int | None) -> list[Any]:
        """One attempt as the page's table holds it (see FIELDS in report.py's script)."""
        info = self._info if self._info_for == row.dataset else self._lookup(row.dataset)
        value = row.metrics.get("correct")
        correct = None if value is None else (1 if value >= 0.999 else 0)
        cats = ",".join(sorted({str(f.get("category", "?")) for f in row.findings})) if row.findings else ""
        verdict = self.verdicts._ids.get(row.verdict)
        status = self.statuses._ids.get(row.status)
        ids = self._group_ids
        if ids is None or ids[0] != row.agent or ids[1] != row.dataset:
            ids = self._group_ids = (row.agent, row.dataset, self.agents.id(row.agent), self.dataset_vocab.id(row.dataset))
        return [
            idx,
            ids[2],
            ids[3],
            info.positions.get(row.item_id, -1) if info else -1,
            row.query_index,
            row.epoch,
            self.verdicts.id(row.verdict) if verdict is None else verdict,
            self.statuses.id(row.status) if status is None else status,
            correct,
            row.response[:MAX_INDEX_TEXT],
            round(row.duration_s, 2),
            row.input_tokens + row.output_tokens,
            round(row.cost_usd, 6),
            cats,
            tchunk,
            row.attempt_id,
            row.reason[:MAX_INDEX_TEXT],
            self.actions._ids.get(row.action) if row.action in self.actions._ids else self.actions.id(row.action),
            row.item_id,
        ]

    def finish(self) -> RunSummary:
        self._flush_group()
        if self.sink is not None:
            self.sink.close()
        self.scores.sort(key=lambda s: (s.agent, s.dataset))
        self.scores = add_comparisons(self.scores)  # best-of rows of budget sweeps; beats-the-prior marks
        self.attribution.sort(key=lambda a: (a.agent, a.dataset))
        return RunSummary(
            scores=self.scores,
            n_rows=self.n,
            datasets=self.dataset_list,
            confusions=dict(self.confusions),
            curves={k: dict(v) for k, v in self.curves.items()},
            agents=self.agents,
            dataset_vocab=self.dataset_vocab,
            verdicts=self.verdicts,
            statuses=self.statuses,
            actions=self.actions,
            last_rowid=self.last_rowid,
            attribution=self.attribution,
        )


def load_run_datasets(run_dir: Path) -> list[DatasetInfo]:
    """The run's datasets as its run.json names them (with `--limit` applied)."""
    config = RunConfig.load(Path(run_dir))
    return [DatasetInfo.build(d.spec.label, d.spec.bench, d.items) for d in load_datasets(config)]


def load_run_trust(run_dir: Path) -> TrustPlan | None:
    """The run's trust plan (harness/trust.py: impossible items, twins), or None when it mixed none in."""
    config = RunConfig.load(Path(run_dir))
    if config.trust is None or not config.trust.active:
        return None
    return trust_plan(config, load_datasets(config))


def summarise(run_dir: Path, datasets: list[DatasetInfo], sink: ChunkSink | None = None,
              conn: sqlite3.Connection | None = None) -> RunSummary:
    """One streaming pass over the store (read-only) into a RunSummary (+ the sink's chunks)."""
    own = conn is None
    conn = conn or connect_readonly(run_dir)
    try:
        plan = load_run_trust(run_dir) if (Path(run_dir) / RUN_CONFIG_FILE).exists() else None
        trust_ids = frozenset(plan.by_id()) if plan is not None else frozenset()
        source_ids = frozenset(t.source_id for t in plan.items if t.kind == "twin") if plan is not None else frozenset()
        rpass = ReportPass(run_dir, datasets, sink, trust_ids=trust_ids, source_ids=source_ids)
        # rows and their decoded columns hold no reference cycles: the cyclic collector would
        # only re-scan the growing set of live objects (items, the epoch's rows) over and over
        with collector_paused():
            feed = rpass.feed
            for rowid, row in iter_rows(conn):
                feed(row, rowid)
            summary = rpass.finish()
        if plan is not None:
            summary.trust = outcome_from_rows(plan, rpass.trust_rows, {d.label: d.items for d in datasets}, rpass.source_rows)
        return summary
    finally:
        if own:
            conn.close()
