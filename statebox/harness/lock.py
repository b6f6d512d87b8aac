"""One writer per run folder: an advisory `flock` on `RUN_DIR/.lock`.

Two processes on one run folder (two `--resume`, or a run and a resume) would both run
the same attempts: one wipes the other's attempt folder and their `events.jsonl` lines
interleave. So the process that coordinates a run holds an exclusive `flock` on
`RUN_DIR/.lock` for as long as it runs; a second one stops before touching anything
with one line naming the holder.

- The kernel drops a `flock` when its holder exits, however it exits (SIGKILL included),
  so a stale lock file never blocks the next run; the file itself stays (rewriting it
  is the holder's first act).
- The file holds JSON naming the holder (`pid`, `host`, `role`, `started`) for the
  message only; the lock is the `flock`, never the file's content.
- Only the coordinating process takes it. A future Ray-cluster head process calls
  `RunLock(run_dir, role="ray-head").acquire()` exactly like the local runner; its
  workers never touch it and write only through the head (rows) or into their own
  attempt folders. (`flock` is per host: a run folder on a network file system shared
  by several heads would need the file system's own locking; one head per run is the
  design.)
- Read-only commands (`statebox report`, `score`, `audit --no-write`) never take it:
  SQLite's WAL lets them read while a run writes. `statebox audit` that writes verdict.json
  takes it (role `audit`), since the run writes those files too.
- Re-entrant inside one process (a per-process registry), since `flock` locks held
  through two descriptors of one process would conflict with each other.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from statebox.errors import StorageError, UserError, storage_error

LOCK_FILE = ".lock"

_held: dict[str, "RunLock"] = {}
_registry_lock = threading.Lock()


class RunFolderBusy(UserError):
    """Another process holds the run folder's lock."""


def _holder_text(raw: str) -> str:
    try:
        info = json.loads(raw)
    except ValueError:
        info = {}
    if not isinstance(info, dict) or "pid" not in info:
        return "another process"
    where = f" on {info['host']}" if info.get("host") and info["host"] != socket.gethostname() else ""
    role = f" ({info['role']})" if info.get("role") and info["role"] != "run" else ""
    return f"pid {info['pid']}{where}{role}"


class RunLock:
    """The exclusive lock on one run folder, held by the process that runs it."""

    def __init__(self, run_dir: Path | str, role: str = "run") -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self.role = role
        self._fd: int | None = None
        self._depth = 0

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "RunLock":
        """Take the lock or raise `RunFolderBusy` (one line naming the holder's pid), or a
        `StorageError` when the folder cannot be written (read-only, full, no permission)."""
        key = str(self.run_dir.resolve())
        with _registry_lock:
            mine = _held.get(key)
            if mine is not None:  # this process already holds it
                mine._depth += 1
                return mine
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise storage_error(exc, self.run_dir, "cannot write the run folder") or exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                try:
                    raw = os.pread(fd, 4096, 0).decode("utf-8", "replace")
                finally:
                    os.close(fd)
                raise RunFolderBusy(
                    f"{self.run_dir}: run folder is in use by {_holder_text(raw)} (lock {self.path}); "
                    "wait for it to finish or stop it, then run again"
                ) from None
            try:
                payload = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "role": self.role,
                                      "started": round(time.time(), 3)}).encode()
                os.ftruncate(fd, 0)
                os.pwrite(fd, payload + b"\n", 0)
            except OSError as exc:
                os.close(fd)
                raise storage_error(exc, self.path, "cannot write the run folder") or exc
            self._fd = fd
            self._depth = 1
            _held[key] = self
            return self

    def release(self) -> None:
        with _registry_lock:
            if self._fd is None:
                return
            self._depth -= 1
            if self._depth > 0:
                return
            _held.pop(str(self.run_dir.resolve()), None)
            fd, self._fd = self._fd, None
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@contextmanager
def hold_run_lock(run_dir: Path | str, role: str = "run") -> Iterator[RunLock]:
    """`with hold_run_lock(run_dir):` — the run folder is this process's until the block ends."""
    lock = RunLock(run_dir, role).acquire()
    try:
        yield lock
    finally:
        lock.release()


__all__ = ["LOCK_FILE", "RunFolderBusy", "RunLock", "StorageError", "hold_run_lock"]
