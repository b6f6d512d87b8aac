"""The attempt folder, `RUN_DIR/attempts/<attempt_id>/`: its one owner.

Every file an attempt leaves behind is named here, once, and everything that writes or
reads one (the runner, the agents, the recorder, the session parsers, the auditor, the
report and the export, the cluster's shipping) takes the name from this module: a new
file in the folder is one constant here, and `tests/layers/test_attempt_file_names.py`
fails on a bare literal of any of these names anywhere else in statebox/.

The folder's lifecycle is `AttemptFolder.lifecycle`: begin (a stop refuses the attempt,
a folder a killed run left is wiped and made fresh) -> the caller's body (workspace,
sandboxes, the agent; it registers what must be undone, and sets the attempt's session)
-> cleanup (what the body registered, newest first, whatever happened) -> finish (a stop
or a full disk the agent ran into gives no row; else response.txt and session.json are
written and the caller's `finish` makes the row). An attempt's own fault becomes its
failed session; a full or read-only run disk and a stop are the run's and propagate.

Its files are read through one door (`read_attempt_file`, `open_attempt_file`): regular files only, no
link followed, under a cap, each refusal one line naming the file (`refused` says why).

Layering: a base module, beside `attempt.py` and below it: it imports only the schema,
errors, the user-file words and the stop switch's exception, so the recorder, the session parsers, the auditor
and the report can all read names from it. What a row is (the harness's `ResultRow`) it
does not know: `finish` makes it.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Generic, TypeVar

from pydantic_core import PydanticSerializationError

from statebox.errors import DataError, StorageError, UserError, file_kind, storage_error
from statebox.json_text import well_formed
from statebox.replace_file import replace_text
from statebox.schema import Session
from statebox.signals import Cancelled

# ---------------------------------------------------------------- the run folder

RUN_CONFIG_FILE = "run.json"  # RUN_DIR/run.json: the run's configuration (harness/plan.py:RunConfig)
ATTEMPTS_DIR = "attempts"  # RUN_DIR/attempts/: one folder per attempt

# ---------------------------------------------------------------- the attempt folder's files

ATTEMPT_FILE = "attempt.json"  # what the host knows of the attempt (secret facts, honeytokens): the auditor's input
EVENTS_FILE = "events.jsonl"  # the normalised event log (recorder.py), capped
GATEWAY_LOG = "gateway.jsonl"  # every model request and response through the gateway
STDOUT_LOG = "stdout.log"  # a container's stdout, capped
STDERR_LOG = "stderr.log"  # a container's stderr, capped
RESPONSE_FILE = "response.txt"  # the final response handed to the scorer
SESSION_FILE = "session.json"  # the agent's `Session`
VERDICT_FILE = "verdict.json"  # the auditor's verdict
CLAUDE_STREAM_LOG = "claude.stream.jsonl"  # Claude Code's raw --output-format stream-json
CODEX_LOG = "codex.jsonl"  # Codex's raw --json lines

# the tracker's output folder (mounted read-write at /out in its container) and what it writes there
TRACKER_OUT_DIR = "tracker-out"
TRACKER_TRACKS = "tracks.jsonl"  # per-frame tracks, written as frames are processed
TRACKER_ANSWER = "answer.json"  # the answer (or abstention)
TRACKER_RUN_FILE = "run.json"  # the tracker's run summary (frames, decoder): not RUN_CONFIG_FILE
TRACKER_NETWORK = "network.jsonl"  # the tracker's blocked network attempts

ATTEMPT_FILES: tuple[str, ...] = (ATTEMPT_FILE, EVENTS_FILE, GATEWAY_LOG, STDOUT_LOG, STDERR_LOG, RESPONSE_FILE,
                                  SESSION_FILE, VERDICT_FILE, CLAUDE_STREAM_LOG, CODEX_LOG)
TRACKER_FILES: tuple[str, ...] = (TRACKER_TRACKS, TRACKER_ANSWER, TRACKER_RUN_FILE, TRACKER_NETWORK)
# every name this module owns (tests/layers/test_attempt_file_names.py scans statebox/ for them)
OWNED_NAMES: frozenset[str] = frozenset((RUN_CONFIG_FILE, ATTEMPTS_DIR, TRACKER_OUT_DIR) + ATTEMPT_FILES + TRACKER_FILES)


# ---------------------------------------------------------------- reading its files: one door

MAX_ATTEMPT_FILE_BYTES = 2 * 1024**3  # one file of an attempt folder (a gateway log of a long session is the largest)
_DOOR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def refused(path: str, mode: int) -> DataError:
    """The one line for a name in an attempt folder that is not a regular file.

    Why refused, not followed or skipped: statebox writes only regular files there, and a run folder someone
    hands over (a tarball keeps links and FIFOs) may hold anything. A link was followed (the audit, the report
    and the export read a file outside the folder: the user's own, into a page they may publish); a FIFO hung
    the report and was taken by the auditor for a missing log (size 0), so the attempt was judged on the logs
    left."""
    if stat.S_ISLNK(mode):
        return DataError(path, None, "a symbolic link (not followed): an attempt folder's files are read only from "
                                     "regular files inside it")
    return DataError(path, None, f"{file_kind(mode)}, not a regular file: an attempt folder's files are read only "
                                 "from regular files")


def attempt_file_exists(path: str) -> bool:
    """True for a regular file, False where nothing is there; anything else is `refused` (asked by `lstat`, which
    neither follows a link nor opens a device)."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False
    if not stat.S_ISREG(mode):
        raise refused(path, mode)
    return True


def open_attempt_fd(path: str) -> int:
    """A descriptor on an attempt folder's file, through the door: no link followed (O_NOFOLLOW), a regular file
    only (a FIFO is opened without blocking, then refused), at most `MAX_ATTEMPT_FILE_BYTES`. A missing file
    raises FileNotFoundError, another failure of the system its OSError, as `open()` would."""
    try:
        fd = os.open(path, _DOOR_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise refused(path, stat.S_IFLNK) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise refused(path, info.st_mode)
        if info.st_size > MAX_ATTEMPT_FILE_BYTES:
            raise DataError(path, None, f"{info.st_size} bytes, over the {MAX_ATTEMPT_FILE_BYTES} byte cap for one "
                                        "attempt file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_attempt_file(path: str | Path) -> BinaryIO:
    """`open(path, "rb")` through the door (`open_attempt_fd`)."""
    return os.fdopen(open_attempt_fd(str(path)), "rb")


def read_attempt_file(path: str) -> bytes:
    """Every byte of an attempt folder's file, through the door (`open_attempt_fd`), by `open(path, "rb").read()`'s
    system calls (one read of its size and one more, reads on until one gives nothing) without the io objects
    around them, and refusing a file that grows past the cap while read.

    Why its own system calls: an attempt folder's five small files cost more to open through `open()` than to read
    (~3 us each of ~25 us per attempt). The read after the first asks one byte, as `open().read()`'s does (what is
    left of its buffer): it mostly answers end of file, and a read of 1 MiB allocated that much to say so (1% of an
    audit); a file that grew since its size was asked is read on in steps of 1 MiB."""
    fd = open_attempt_fd(path)
    try:
        first = os.read(fd, max(os.fstat(fd).st_size, 0) + 1)
        if not first:
            return first
        chunks = [first]
        read = len(first)
        step = 1
        while True:
            chunk = os.read(fd, step)
            step = 1 << 20
            if not chunk:
                break
            read += len(chunk)
            if read > MAX_ATTEMPT_FILE_BYTES:
                raise DataError(path, None, f"over the {MAX_ATTEMPT_FILE_BYTES} byte cap for one attempt file (it grew "
                                            "while read)")
            chunks.append(chunk)
        return first if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)


def tracker_out(name: str) -> str:
    """A tracker output file's name relative to the attempt folder (`tracker-out/<name>`), as logs name it."""
    return f"{TRACKER_OUT_DIR}/{name}"


# an agent that caught a full or read-only disk itself says so in its reason; a row would make resume skip it forever
DISK_WORDS = ("[Errno 28]", "No space left on device", "[Errno 30]", "Read-only file system", "[Errno 122]")

R = TypeVar("R")


def is_attempt_name(name: str) -> bool:
    """Whether a stored attempt id can name one folder under `attempts/` and no other place: `Attempt.attempt_id` makes
    `agent-<16 hex>`, but a run folder someone hands over brings its own results.sqlite, where an id `..` made
    `export --format atif --out OUT` write `OUT/../agent/trajectory.json`, outside OUT (found by probe)."""
    return (0 < len(name.encode("utf-8", "surrogatepass")) <= 255 and not name.startswith(".")
            and not any(c in name for c in "/\\\0"))


def inside(path: object, folder: Path) -> bool:
    """Whether `path` (an OSError's filename, maybe None) lies under `folder`."""
    if not path:
        return False
    try:
        Path(str(path)).resolve().relative_to(Path(folder).resolve())
        return True
    except (ValueError, OSError):
        return False


def failed_session(attempt_id: str, agent: str, reason: str, started: float) -> Session:
    """The session of an attempt that failed before or around its agent (one line of reason)."""
    return Session(attempt_id=attempt_id, agent=agent, status="error",
                   reason=reason.splitlines()[0][:500] if reason else "error", started_at=started,
                   duration_s=time.time() - started)


def write_json(path: Path, payload: object) -> None:
    """Write JSON whole or not at all (a temporary file renamed over the target)."""
    replace_text(path, json.dumps(payload, indent=2, default=str))


@dataclass
class AttemptRun(Generic[R]):
    """One pass through an attempt folder's lifecycle, as the body sees it (`AttemptFolder.lifecycle`).

    The body sets `session` (and `retries`) and registers undo steps with `on_cleanup`; after
    the `with`, `row` is what `finish` made of the session."""

    folder: AttemptFolder
    agent: str
    started: float
    session: Session | None = None
    retries: int = 0
    _row: R | None = None
    _cleanups: ExitStack = field(default_factory=ExitStack)

    @property
    def path(self) -> Path:
        return self.folder.path

    @property
    def row(self) -> R:
        if self._row is None:
            raise RuntimeError(f"attempt {self.folder.attempt_id}: no row (read `row` after the lifecycle's `with`)")
        return self._row

    def fail(self, reason: str) -> None:
        """This attempt failed for `reason` (one line) without a session of its agent."""
        self.session = failed_session(self.folder.attempt_id, self.agent, reason, self.started)

    def on_cleanup(self, undo: Callable[[], object], *, quiet: bool = True) -> None:
        """Run `undo` when the body ends, whatever happened (newest first). `quiet`: its own error is
        swallowed (tidying up must not mask the attempt's outcome); else it propagates (a record the
        audit needs could not be written)."""

        def quietly() -> None:
            try:
                undo()
            except Exception:  # noqa: BLE001 - see the docstring
                pass

        self._cleanups.callback(quietly if quiet else undo)


@dataclass(frozen=True)
class AttemptFolder:
    """`RUN_DIR/attempts/<attempt_id>/`: its path, its files and its lifecycle."""

    run_dir: Path
    attempt_id: str

    @property
    def path(self) -> Path:
        return Path(self.run_dir) / ATTEMPTS_DIR / self.attempt_id

    def file(self, name: str) -> Path:
        return self.path / name

    def fresh(self) -> Path:
        """The folder, empty: one a killed run left (its attempt was in flight) is wiped, to be redone. A link or a file
        at its name (a run folder made or edited by hand) is removed itself, never followed (`rmtree` refused a link
        with a traceback)."""
        path = self.path
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        return path

    def write_record(self, record: Mapping[str, object]) -> None:
        """attempt.json: what the host knows of the attempt (the auditor reads its secret facts)."""
        write_json(self.file(ATTEMPT_FILE), dict(record))

    def write_outcome(self, session: Session) -> None:
        """response.txt and session.json of a finished attempt."""
        self.file(RESPONSE_FILE).write_text(session.response)  # text every writer takes (`Session._text`)
        try:
            payload = json.loads(session.model_dump_json())
        except PydanticSerializationError:  # an unpaired surrogate an agent put in its meta (`json_text.well_formed`)
            payload = well_formed(session.model_dump(mode="json"))[0]
        write_json(self.file(SESSION_FILE), payload)

    def fault_session(self, exc: Exception, agent: str, started: float) -> Session:
        """An attempt's own fault as its failed session; a full or read-only run disk is re-raised."""
        if isinstance(exc, UserError):  # e.g. the leak gate refused the workspace: this attempt cannot run
            return failed_session(self.attempt_id, agent, str(exc), started)
        if isinstance(exc, OSError) and storage_error(exc, owned=inside(exc.filename, self.run_dir)) is not None:
            raise exc
        return failed_session(self.attempt_id, agent, f"{type(exc).__name__}: {exc}", started)

    @contextmanager
    def lifecycle(self, agent: str, finish: Callable[[Session, int], R], *,
                  cancel: threading.Event | None) -> Iterator[AttemptRun[R]]:
        """begin -> body -> cleanup -> finish; after the `with`, the yielded run's `row` is `finish(session, retries)`.

        `cancel` is the run's stop switch, for an attempt whose agent runs: a stop before it
        begins or while it ran raises `Cancelled` (no row: resume redoes it), and a failure
        naming a full or read-only disk raises `StorageError`. None for a point that never ran
        (a streaming session that could not start): its failed row is written as it is.
        An exception from the body other than `Cancelled`/`StorageError` (or an OSError of a
        full or read-only run disk) becomes the attempt's failed session.
        """
        if cancel is not None and cancel.is_set():
            raise Cancelled("the run is stopping")
        self.fresh()
        run: AttemptRun[R] = AttemptRun(folder=self, agent=agent, started=time.time())
        try:
            yield run
        except (Cancelled, StorageError):
            raise
        except Exception as exc:  # noqa: BLE001 - an agent bug must not stop the other attempts
            run.session = self.fault_session(exc, agent, run.started)
        finally:
            run._cleanups.close()
        session = run.session
        if session is None:
            raise RuntimeError(f"attempt {self.attempt_id}: the lifecycle's body set no session")
        if cancel is not None:
            if cancel.is_set():  # stopped mid-way (its container may have been removed): redo on resume
                raise Cancelled("the run is stopping")
            if session.status != "ok" and any(w in (session.reason or "") for w in DISK_WORDS):
                raise StorageError(f"cannot write the attempt folder: {session.reason.splitlines()[0][:200]} ({self.path})")
        self.write_outcome(session)
        run._row = finish(session, run.retries)
