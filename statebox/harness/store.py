"""The run's result store: one SQLite file (WAL) with one row per finished attempt.

Why SQLite with the attempt id as primary key: a run killed with SIGKILL must
lose at most the attempts in flight and never duplicate a row when resumed. A
row is written in one transaction when its attempt finishes; `INSERT ... ON
CONFLICT DO NOTHING` makes a replayed attempt a no-op; WAL lets the report read
while a run writes.

Why an existing file is judged read-only before anything opens it for writing
(`check_store_file`): `--resume` on a garbage, truncated or foreign file used to be a
traceback, and `CREATE TABLE IF NOT EXISTS` would have added statebox's table to somebody
else's database. A file that is not statebox's store is one line (exit 2), left byte for byte
as it was: no write, no journal replay, no "repair".
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Iterator

from pydantic import BaseModel, ConfigDict, Field

from statebox.errors import DataError, StorageError, UserError, storage_error

RESULTS_FILE = "results.sqlite"
SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite 3 database file

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    attempt_id     TEXT PRIMARY KEY,
    run_id         TEXT NOT NULL,
    agent          TEXT NOT NULL,
    dataset        TEXT NOT NULL,
    bench          TEXT NOT NULL,
    item_id        TEXT NOT NULL,
    query_index    INTEGER NOT NULL,
    epoch          INTEGER NOT NULL,
    status         TEXT NOT NULL,
    reason         TEXT NOT NULL DEFAULT '',
    response       TEXT NOT NULL DEFAULT '',
    verdict        TEXT NOT NULL DEFAULT 'clean',
    action         TEXT NOT NULL DEFAULT 'none',
    findings       TEXT NOT NULL DEFAULT '[]',
    metrics        TEXT NOT NULL DEFAULT '{}',
    duration_s     REAL NOT NULL DEFAULT 0,
    input_tokens   INTEGER NOT NULL DEFAULT 0,
    output_tokens  INTEGER NOT NULL DEFAULT 0,
    cost_usd       REAL NOT NULL DEFAULT 0,
    frames_decoded INTEGER NOT NULL DEFAULT 0,
    frames_model   INTEGER NOT NULL DEFAULT 0,
    retries        INTEGER NOT NULL DEFAULT 0,
    finished_at    REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS results_agent ON results(agent, dataset);
"""


class ResultRow(BaseModel):
    """One finished attempt as stored; also what the report and `run --json` read."""

    model_config = ConfigDict(extra="forbid")

    attempt_id: str
    run_id: str
    agent: str
    dataset: str
    bench: str
    item_id: str
    query_index: int = 0
    epoch: int = 0
    status: str = "ok"
    reason: str = ""
    response: str = ""
    verdict: str = "clean"
    action: str = "none"
    findings: list[dict[str, Any]] = Field(default_factory=list)
    metrics: dict[str, float | None] = Field(default_factory=dict)
    duration_s: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    frames_decoded: int = 0
    frames_model: int = 0
    retries: int = 0
    finished_at: float = 0.0


_JSON_COLUMNS = ("findings", "metrics")


def _column_kind(column: str) -> str:
    """What SQLite holds in a column of a statebox store: `text`, `integer` or `number` (`ResultRow`'s annotation;
    the JSON columns are text)."""
    annotation = ResultRow.model_fields[column].annotation
    if column in _JSON_COLUMNS or annotation is str:
        return "text"
    return "integer" if annotation is int else "number"


_KIND_WORDS = {"text": "text", "integer": "an integer", "number": "a number"}
_SQLITE_TYPES = {"text": "('text')", "integer": "('integer')", "number": "('real', 'integer')"}
# The first row (attempt id, column) whose cell is not of its column's kind, in one scan (`check_store_file`): a
# handed-over store's cells are not ours, and the report reads rows without re-validating them (at 100k rows
# pydantic's cost shows), so a text where a number belongs was a traceback deep in it.
_MISFIT_SQL = ("SELECT attempt_id, misfit FROM (SELECT attempt_id, CASE "
               + " ".join(f"WHEN typeof({c}) NOT IN {_SQLITE_TYPES[_column_kind(c)]} THEN '{c}'" for c in ResultRow.model_fields)
               + " END AS misfit FROM results) WHERE misfit IS NOT NULL LIMIT 1")


def decode_stored(column: str, text: str, attempt_id: object, loads: Callable[[str], Any], where: str) -> Any:
    """A JSON column's value (`findings`: a list of flat objects; `metrics`: an object of numbers or nulls), or one
    line (`DataError` naming `where`, the attempt and the column) when the cell is not that.

    Why here: a handed-over store's cells are someone else's, the report decodes them without pydantic, and a
    findings cell nested 100,000 deep was a RecursionError in the report, the export and `--resume`."""
    try:
        value = loads(text)
    except (ValueError, RecursionError) as exc:
        raise DataError(where, None, f"the row of attempt {attempt_id!r} holds {column} that is not JSON "
                        f"({str(exc)[:80]}); left untouched") from None
    if column == "findings":
        fits = isinstance(value, list) and all(
            isinstance(f, dict) and all(v is None or isinstance(v, (str, int, float)) for v in f.values()) for f in value)
        shape = "a list of flat objects"
    else:
        fits = isinstance(value, dict) and all(
            v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in value.values())
        shape = "an object of numbers"
    if not fits:
        raise DataError(where, None, f"the row of attempt {attempt_id!r} holds {column} that is not {shape}; "
                        "left untouched")
    return value


def check_store_file(path: Path) -> None:
    """Refuse (`DataError`, one line) an existing file that is not a statebox result store.

    Read-only all the way: the kind of file (`lstat`: a link or FIFO planted as the store is
    refused, never followed or opened), the SQLite header, then a `mode=ro` connection with
    `query_only` that reads the schema and runs `PRAGMA quick_check(3)`. The schema is an allow-list: the results
    table and its indexes, nothing else (a trigger in a handed-over store ran inside statebox's own
    writes: a re-audit's `contaminated` was put back to `clean`). An empty file passes:
    SQLite makes it a new database, and there is nothing in it to lose.
    """
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise DataError(path, None, f"is {kind}; a statebox result store is a regular file")
    if st.st_size == 0:
        return
    seen = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if seen in _CHECKED:  # the live view polls: judge each version of the file once
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            head = os.read(fd, len(SQLITE_MAGIC))
        finally:
            os.close(fd)
    except OSError as exc:
        raise DataError(path, None, f"cannot read the result store ({exc.strerror or exc})") from None
    if head != SQLITE_MAGIC:
        raise DataError(path, None, "not a statebox result store (not an SQLite database); left untouched")
    # no -wal beside it: `immutable` too, so SQLite creates no -wal/-shm of its own for a file
    # it may refuse; with one (a run killed mid-write) the log must be read, and only the
    # store's own side files are touched
    wal = path.with_name(path.name + "-wal")
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + ("?mode=ro" if wal.exists() else "?mode=ro&immutable=1")
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=30)
    except sqlite3.Error as exc:
        raise DataError(path, None, f"not a readable SQLite database ({exc}); left untouched") from None
    try:
        conn.execute("PRAGMA query_only=1")
        tables = sorted(name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
                        if not name.startswith("sqlite_"))
        if tables != ["results"]:
            raise DataError(path, None, "not a statebox result store (an SQLite database with "
                            f"{'tables ' + ', '.join(tables[:8]) if tables else 'no tables'}); left untouched")
        others = [(kind, name) for kind, name in conn.execute("SELECT type, name FROM sqlite_master")
                  if not (kind == "table" and name == "results")
                  and not (kind == "index" and (name == _AGENT_INDEX or name.startswith(_KEY_INDEX)))]
        if others:
            raise DataError(path, None, "not a statebox result store (it also holds "
                            f"{', '.join(f'{kind} {name}' for kind, name in others[:4])}; a statebox store holds its "
                            "results table and its indexes alone, and a trigger would run inside statebox's writes); left untouched")
        columns = {row[1] for row in conn.execute("PRAGMA table_info(results)")}
        missing = [name for name in ResultRow.model_fields if name not in columns]
        if missing:
            raise DataError(path, None, "not a statebox result store (its results table lacks "
                            f"{', '.join(missing[:6])}); left untouched")
        problems = [row[0] for row in conn.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            raise DataError(path, None, f"the result store is damaged (SQLite: {'; '.join(problems)[:300]}); left untouched")
        # every cell of its column's kind, once the file is known sound
        misfit = conn.execute(_MISFIT_SQL).fetchone()
        if misfit is not None:
            attempt, column = misfit
            raise DataError(path, None, f"the row of attempt {attempt!r} holds a {column} that is not "
                            f"{_KIND_WORDS[_column_kind(column)]}; not a statebox result store, left untouched")
    except sqlite3.Error as exc:
        raise DataError(path, None, f"the result store is damaged or not SQLite ({exc}); left untouched") from None
    finally:
        conn.close()
    _CHECKED.add(seen)


# The indexes a statebox store holds: `_SCHEMA`'s, and SQLite's own for the results table's primary key.
_AGENT_INDEX, _KEY_INDEX = "results_agent", "sqlite_autoindex_results_"
_CHECKED: set[tuple[str, int, int]] = set()  # (path, size, mtime) of stores check_store_file passed


def _sqlite_storage_error(exc: Exception, path: Path, doing: str) -> StorageError | None:
    """SQLite's words for a full or read-only disk, as the one-line `StorageError`."""
    found = storage_error(exc, path, doing)
    if found is not None:
        return found
    text = str(exc).lower()
    if "disk is full" in text or "no space" in text:
        return StorageError(f"{doing}: no space left on device ({path})")
    if "readonly" in text or "read-only" in text:
        return StorageError(f"{doing}: read-only file system ({path})")
    if "unable to open database" in text or "disk i/o error" in text:
        return StorageError(f"{doing}: {exc} ({path})")
    return None


class ResultStore:
    """Thread-safe access to `RUN_DIR/results.sqlite`.

    A full or read-only disk raises `StorageError` (one line, exit 2): the transaction of
    the row being written rolls back, every row written before stays.
    """

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / RESULTS_FILE
        self._lock = threading.Lock()
        check_store_file(self.path)  # a foreign or damaged file: one line, the file untouched
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
            self._conn.commit()
        except (OSError, sqlite3.Error) as exc:
            err = _sqlite_storage_error(exc, self.path, "cannot open the result store")
            if err is None:
                raise
            raise err from exc

    def done_ids(self) -> set[str]:
        with self._lock:
            return {row[0] for row in self._conn.execute("SELECT attempt_id FROM results")}

    def add(self, row: ResultRow) -> bool:
        """Insert a finished attempt; returns False when it was already there (never duplicates)."""
        values = row.model_dump()
        for key in _JSON_COLUMNS:
            values[key] = json.dumps(values[key], sort_keys=True)
        columns = ", ".join(values)
        marks = ", ".join(f":{k}" for k in values)
        with self._lock:
            try:
                cursor = self._conn.execute(
                    f"INSERT INTO results ({columns}) VALUES ({marks}) ON CONFLICT(attempt_id) DO NOTHING", values
                )
                self._conn.commit()
            except sqlite3.Error as exc:
                try:
                    self._conn.rollback()
                except sqlite3.Error:
                    pass
                err = _sqlite_storage_error(exc, self.path, "cannot write a result row")
                if err is None:
                    raise
                raise err from exc
            return cursor.rowcount == 1

    def add_many(self, rows: list[ResultRow]) -> int:
        """Insert finished attempts in one transaction (the head records rows that finished
        together at once); returns how many were new. Same no-duplicate rule as `add`."""
        if not rows:
            return 0
        if len(rows) == 1:
            return int(self.add(rows[0]))
        payloads = []
        for row in rows:
            values = row.model_dump()
            for key in _JSON_COLUMNS:
                values[key] = json.dumps(values[key], sort_keys=True)
            payloads.append(values)
        columns = ", ".join(payloads[0])
        marks = ", ".join(f":{k}" for k in payloads[0])
        with self._lock:
            try:
                before = self._conn.total_changes
                self._conn.executemany(
                    f"INSERT INTO results ({columns}) VALUES ({marks}) ON CONFLICT(attempt_id) DO NOTHING", payloads
                )
                self._conn.commit()
                return self._conn.total_changes - before
            except sqlite3.Error as exc:
                try:
                    self._conn.rollback()
                except sqlite3.Error:
                    pass
                err = _sqlite_storage_error(exc, self.path, "cannot write result rows")
                if err is None:
                    raise
                raise err from exc

    def update_verdict(self, attempt_id: str, verdict: str, action: str, findings: list[dict[str, Any]]) -> None:
        """Re-auditing a finished run rewrites only the audit columns."""
        with self._lock:
            self._conn.execute(
                "UPDATE results SET verdict=?, action=?, findings=? WHERE attempt_id=?",
                (verdict, action, json.dumps(findings, sort_keys=True), attempt_id),
            )
            self._conn.commit()

    def rows(self) -> list[ResultRow]:
        return list(self.iter_rows())

    def iter_rows(self) -> Iterator[ResultRow]:
        with self._lock:
            cursor = self._conn.execute("SELECT * FROM results ORDER BY agent, dataset, item_id, query_index, epoch")
            names = [d[0] for d in cursor.description]
            fetched = cursor.fetchall()
        for raw in fetched:
            values = dict(zip(names, raw))
            for key in _JSON_COLUMNS:
                values[key] = decode_stored(key, values[key], values.get("attempt_id"), json.loads, str(self.path))
            yield ResultRow.model_validate(values)

    def count(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def open_existing(run_dir: Path) -> ResultStore:
    """Open a finished or partial run's store; a folder without one is a user error."""
    path = Path(run_dir) / RESULTS_FILE
    if not path.exists() and not path.is_symlink():
        raise UserError(f"{run_dir}: not a statebox run folder (no {RESULTS_FILE})")
    return ResultStore(Path(run_dir))
