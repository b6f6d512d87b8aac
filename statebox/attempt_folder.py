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

Layering: a base module, beside `attempt.py` and below it: it imports only the schema,
errors and the stop switch's exception, so the recorder, the session parsers, the auditor
and the report can all read names from it. What a row is (the harness's `ResultRow`) it
does not know: `finish` makes it.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from statebox.errors import StorageError, UserError, storage_error
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


def tracker_out(name: str) -> str:
    """A tracker output file's name relative to the attempt folder (`tracker-out/<name>`), as logs name it."""
    return f"{TRACKER_OUT_DIR}/{name}"


# an agent that caught a full or read-only disk itself says so in its reason; a row would make resume skip it forever
DISK_WORDS = ("[Errno 28]", "No space left on device", "[Errno 30]", "Read-only file system", "[Errno 122]")

R = TypeVar("R")


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
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str))
    tmp.replace(path)


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
        """The folder, empty: one a killed run left (its attempt was in flight) is wiped, to be redone."""
        path = self.path
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        return path

    def write_record(self, record: Mapping[str, object]) -> None:
        """attempt.json: what the host knows of the attempt (the auditor reads its secret facts)."""
        write_json(self.file(ATTEMPT_FILE), dict(record))

    def write_outcome(self, session: Session) -> None:
        """response.txt and session.json of a finished attempt."""
        self.file(RESPONSE_FILE).write_text(session.response)
        write_json(self.file(SESSION_FILE), json.loads(session.model_dump_json()))

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
