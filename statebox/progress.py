"""Progress of a long command, on a terminal and off it.

On a terminal the rich bars show progress as it happens. Written to a file or a pipe
(CI, `| tee`, nohup) rich draws nothing until the end, so a six-minute run looked dead.
`ProgressDisplay` takes both roads behind one interface: a terminal gets the rich bars
(the command's own columns), anything else gets one plain line at least every
`interval` seconds from a ticker thread, whether or not anything finished since:

    [progress] run: oracle 4/28, tracker 2/28 | 6/56 done, 2 running, 1 failed, elapsed 0:00:45, ETA 0:06:00

`done/total` per task and overall; `running` as the command reports it (or, given
`slots`, the remaining work capped by the slots: an upper bound, written `running<=N`);
`failed`; elapsed since the display started; ETA from the rate of work done under this
display (a resumed run's earlier rows do not count as speed). A task with no total (an
image build) shows its elapsed time and last note only. The interval is
STATEBOX_PROGRESS_INTERVAL seconds (default 10, so a line comes at least every 15 s).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import Progress, ProgressColumn, TaskID

from statebox.errors import UserError

INTERVAL_ENV = "STATEBOX_PROGRESS_INTERVAL"
DEFAULT_INTERVAL = 10.0


def progress_interval() -> float:
    """Seconds between plain progress lines (STATEBOX_PROGRESS_INTERVAL, default 10)."""
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if not raw:
        return DEFAULT_INTERVAL
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise UserError(f"{INTERVAL_ENV}={raw!r} is not a number of seconds in (0, 3600]")
    return value


def clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


@dataclass
class _Task:
    name: str
    total: int | None
    done: int = 0
    failed: int = 0
    running: int | None = None
    note: str = ""
    done_at_start: int = 0
    fields: dict[str, object] = field(default_factory=dict)


class ProgressDisplay:
    """Rich bars on a terminal, else a plain line every `interval` seconds (see the module docstring).

    `columns` are the rich columns of the terminal display (a task's extra fields, given to `add` and
    `update`, fill the columns' `{task.fields[...]}`; none: the terminal shows only the command's own
    lines, as a command that prints a line per step did before); `slots` (workers, sandboxes at once)
    bounds the running count when the command cannot report it. `plain` forces a mode (None: the
    console decides). A quiet console gets nothing. `quiet_if_quick`: for a command that is mostly done in
    a moment (an audit): off a terminal no final line unless a periodic one came, on one the bar goes when done.
    """

    def __init__(self, title: str, console: Console, columns: Sequence[ProgressColumn | str] | None = None, *,
                 slots: int | None = None, interval: float | None = None, plain: bool | None = None,
                 quiet_if_quick: bool = False) -> None:
        self.title = title
        self.console = console
        self.slots = slots
        self.interval = interval if interval is not None else progress_interval()
        self.plain = (not console.is_terminal) if plain is None else plain
        self._tasks: dict[str, _Task] = {}
        self._rich_ids: dict[str, TaskID] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = time.monotonic()
        self._rich = None if self.plain or columns is None else Progress(*columns, console=console, transient=quiet_if_quick)
        # a command that is mostly quick (an audit of a few sessions): off a terminal its final line comes only
        # after a periodic one did (the work lasted an interval), and on a terminal the bar goes when done
        self.quiet_if_quick = quiet_if_quick
        self._ticked = False

    # -- tasks -----------------------------------------------------------------------------------
    def add(self, name: str, total: int | None = None, done: int = 0, **fields: object) -> None:
        with self._lock:
            self._tasks[name] = _Task(name, total, done, done_at_start=done, fields=dict(fields))
        if self._rich is not None:
            task_fields: dict[str, Any] = dict(fields)  # rich's task fields, read by the columns' `{task.fields[...]}`
            self._rich_ids[name] = self._rich.add_task(name, total=total, completed=done, **task_fields)

    def update(self, name: str, *, done: int | None = None, total: int | None = None, failed: int | None = None,
               running: int | None = None, note: str | None = None, **fields: object) -> None:
        with self._lock:
            task = self._tasks[name]
            if done is not None:
                task.done = done
            if total is not None:
                task.total = total
            if failed is not None:
                task.failed = failed
            if running is not None:
                task.running = running
            if note is not None:
                task.note = note
            task.fields.update(fields)
        if self._rich is not None:
            extra: dict[str, Any] = dict(fields)  # rich's task fields (and its description)
            if failed is not None and "failed" in self._rich.tasks[self._rich_ids[name]].fields:
                extra["failed"] = failed
            if note is not None:
                extra["description"] = note
            self._rich.update(self._rich_ids[name], completed=done, total=total, **extra)

    # -- the plain line ---------------------------------------------------------------------------
    def line(self) -> str:
        """The plain progress line as of now."""
        with self._lock:
            tasks = list(self._tasks.values())
        elapsed = time.monotonic() - self._started
        parts = [f"elapsed {clock(elapsed)}"]
        counted = [t for t in tasks if t.total is not None]
        if counted:
            done = sum(t.done for t in counted)
            total = sum(t.total or 0 for t in counted)
            failed = sum(t.failed for t in counted)
            reported = [t.running for t in counted if t.running is not None]
            if reported:
                running = f"{sum(reported)} running"
            elif self.slots is not None:
                running = f"running<={min(self.slots, total - done)}"
            else:
                running = ""
            fresh = done - sum(t.done_at_start for t in counted)
            eta = clock(elapsed / fresh * (total - done)) if fresh > 0 else ("0:00:00" if done >= total else "?")
            parts = [f"{done}/{total} done"] + ([running] if running else []) + [f"{failed} failed", parts[0],
                                                                                 f"ETA {eta}"]
        if not tasks:
            return f"[progress] {self.title}: starting, {parts[0]}"
        head = ", ".join(f"{t.name} {t.done}/{t.total}" if t.total is not None else t.name for t in tasks)
        notes = "; ".join(t.note for t in tasks if t.note)
        text = f"[progress] {self.title}: " + (f"{head} | " if len(tasks) > 1 else "") + ", ".join(parts)
        return text + (f" ({notes})" if notes else "")

    def _emit(self) -> None:
        # Nothing before the command has work to count: a command that fails while it starts
        # (a refused cluster, a bad input found late) keeps its one error line alone on stderr.
        if self.console.quiet or not self._tasks:
            return
        text = self.line()
        with self._lock:
            self.console.file.write(text + "\n")
            self.console.file.flush()

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            self._emit()
            self._ticked = True

    # -- lifetime -------------------------------------------------------------------------------
    def __enter__(self) -> ProgressDisplay:
        self._started = time.monotonic()
        if self._rich is not None:
            self._rich.start()
        elif self.plain:
            self._thread = threading.Thread(target=self._tick, name="statebox-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._rich is not None:
            if exc_type is not None:
                # a signal or an error ends the command with one line on stderr: no final bar beside it
                self._rich.live.transient = True
            self._rich.stop()
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.plain and exc_type is None and (self._ticked or not self.quiet_if_quick):
            self._emit()  # the final state
