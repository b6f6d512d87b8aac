"""SIGINT, SIGTERM and SIGHUP: one clean way out for every statebox command.

`install()` (called once by `statebox.cli.main`) routes all three to one handler, so a
`kill`, a closed terminal and Ctrl-C take the same path: the main thread raises
`Interrupted` at its next safe point, every `finally` runs (containers removed by
`SandboxEngine.run`, workspaces cleaned, the gateway closed), the store keeps every row
already written, and the CLI prints one line and exits 128 + the signal number
(130 / 143 / 129).

The handler only records the signal; it never raises. Python runs a signal handler in
the main thread between two bytecodes, wherever that thread is: inside
`threading.Thread.start()`, a lock's `acquire`/`release`, a `finally` block, the store's
transaction. An exception raised from there unwinds through that critical section
(`RuntimeError: release unlocked lock` and a traceback instead of exit 128+N), so the
raise happens only at *safe points*: `check()`, and the waits below, which block in
short slices and check between them (`wait_event`, `wait_futures`, `sleep`,
`run_stoppable`). Every blocking wait of the main thread goes through one of them; a
blocking call without a timeout there would make the signal wait for it.

`Interrupted` is a `BaseException` but deliberately not a `KeyboardInterrupt`: click
turns a KeyboardInterrupt into "Aborted!" and exit 1, and `except Exception` in agent
code must not swallow it either.

Worker threads never see a signal. At the same safe points a worker raises `Cancelled`
instead (its attempt must not be recorded). Code that runs work in threads (the harness
runner) catches `Interrupted` in the main thread, sets its cancel event (workers then
raise `Cancelled` at their next check instead of starting anything new) and removes its
own containers (`sandbox/docker.py:remove_own_containers`); `cli.main` repeats that sweep
for this process as a backstop for any other command that starts containers.

A backstop for a path that reaches no safe point (a long computation in a library, a
blocking call missed here): a daemon thread started by `install()` notices a signal the
main thread has not acted on within `UNANSWERED_S`, removes this process's containers,
prints the one line and ends the process (`os._exit`, never an exception into the main
thread). A second signal while stopping is ignored; a third exits at once.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future
from concurrent.futures import wait as futures_wait
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

HANDLED = ("SIGINT", "SIGTERM", "SIGHUP")
# Not a stop: `kill -USR1 PID` prints every thread's stack to stderr and the command goes on (faulthandler, which
# writes from the signal handler itself, so it answers even where the main thread is stuck in C). Where a long run
# is, without installing py-spy; the demo's end-to-end test sends it before it kills a demo that ran out of time.
STACKS_SIGNAL = "SIGUSR1"
FORCE_AFTER = 3  # the third signal while stopping exits at once (cleanup is bounded anyway)
SLICE_S = 0.1  # how long a safe wait blocks between two checks of the stop flag
UNANSWERED_S = 15.0  # a signal the main thread has not reached a safe point for by then ends the process

# Written by the handler only. A list append is one bytecode-level operation with no lock a
# main thread interrupted mid-way could hold (a threading.Event's `set` takes its condition's
# lock, which the interrupted main thread may be holding inside `Event.wait`: a deadlock).
_received: list[int] = []
# Set by the main thread when it acts on the stop (raises `Interrupted`, or prints its line).
_answered: list[bool] = []
_backstop: list[threading.Thread] = []


class Interrupted(BaseException):
    """A stop signal arrived; raised in the main thread at a safe point after it was handled."""

    def __init__(self, signum: int, detail: str = "") -> None:
        super().__init__(signum)
        self.signum = signum
        self.detail = detail

    @property
    def name(self) -> str:
        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def __str__(self) -> str:
        line = f"stopped by {self.name}; containers removed"
        return f"{line}; {self.detail}" if self.detail else line


class Cancelled(BaseException):
    """Raised in a worker thread whose run is stopping: the attempt must not be recorded."""


def stopping() -> bool:
    """True once a stop signal arrived in this process."""
    return bool(_received)


def received() -> int | None:
    """The first stop signal's number, or None."""
    return _received[0] if _received else None


def interrupted(detail: str = "") -> Interrupted:
    """The `Interrupted` for the first signal received (the caller raises it)."""
    signum = received()
    if signum is None:
        raise RuntimeError("interrupted() called with no signal received")
    return Interrupted(signum, detail)


def answered() -> None:
    """The main thread is acting on the stop: the backstop stands down."""
    if not _answered:
        _answered.append(True)


def check() -> None:
    """A safe point: once a stop signal arrived, raise `Interrupted` in the main thread and
    `Cancelled` in any other thread; otherwise return at once."""
    if not _received:
        return
    if threading.current_thread() is threading.main_thread():
        answered()
        raise interrupted()
    raise Cancelled("statebox is stopping")


def _handler(signum: int, frame: FrameType | None) -> None:
    """Record the signal, nothing else: no exception, no lock (see the module's docstring)."""
    _received.append(signum)
    if len(_received) >= FORCE_AFTER:
        os._exit(128 + signum)
    # the first signal is acted on at the main thread's next safe point; a second is ignored:
    # the clean-up already under way is bounded


def install(sweep: Callable[[], object] | None = None) -> None:
    """Route SIGINT/SIGTERM/SIGHUP to the recording handler (main thread only; an ignored
    SIGHUP, as under nohup, stays ignored) and start the backstop, which calls `sweep` (the
    CLI's container sweep) before it ends a process whose main thread never answered."""
    if threading.current_thread() is not threading.main_thread():
        return
    for name in HANDLED:
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        if name == "SIGHUP" and signal.getsignal(signum) == signal.SIG_IGN:
            continue
        signal.signal(signum, _handler)
    stacks = getattr(signal, STACKS_SIGNAL, None)
    if stacks is not None and sys.stderr is not None:
        try:
            faulthandler.register(stacks, file=sys.stderr, all_threads=True)
        except (AttributeError, OSError, ValueError):  # stderr with no descriptor (captured: io.UnsupportedOperation)
            pass
    if not _backstop:
        thread = threading.Thread(target=_watch_unanswered, args=(sweep or (lambda: None),),
                                  name="statebox-signal-backstop", daemon=True)
        _backstop.append(thread)
        thread.start()


def _watch_unanswered(sweep: Callable[[], object], poll_s: float = 0.2) -> None:
    """The backstop (a daemon thread): see the module's docstring."""
    while not _received:
        time.sleep(poll_s)
    deadline = time.monotonic() + UNANSWERED_S
    while time.monotonic() < deadline:
        if _answered:
            return
        time.sleep(poll_s)
    if _answered:
        return
    try:
        sweep()
    except BaseException:  # noqa: BLE001 - exiting regardless
        pass
    exc = Interrupted(_received[0], "forced: the command reached no safe point in time")
    try:
        print(f"statebox: {exc}", file=sys.stderr, flush=True)
    finally:
        os._exit(exc.exit_code)


def reset_for_tests() -> None:
    _received.clear()
    _answered.clear()


# ------------------------------------------------------------------ safe waits


def sleep(seconds: float) -> None:
    """`time.sleep` that ends at a stop signal (raising as `check` does)."""
    deadline = time.monotonic() + max(seconds, 0.0)
    while True:
        check()
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, SLICE_S))


def wait_event(event: threading.Event, timeout: float | None = None) -> bool:
    """`event.wait(timeout)` that ends at a stop signal (raising as `check` does)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        check()
        left = SLICE_S if deadline is None else min(SLICE_S, deadline - time.monotonic())
        if left <= 0:
            return event.is_set()
        if event.wait(left):
            return True


def wait_futures(futures: Iterable[Future], timeout: float | None = None,
                 return_when: str = FIRST_COMPLETED) -> tuple[set[Future], set[Future]]:
    """`concurrent.futures.wait` that ends at a stop signal (raising as `check` does)."""
    pending = list(futures)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        check()
        left = SLICE_S if deadline is None else min(SLICE_S, deadline - time.monotonic())
        done, not_done = futures_wait(pending, timeout=max(left, 0.0), return_when=return_when)
        if (done and return_when == FIRST_COMPLETED) or not not_done or left <= 0:
            return done, not_done


def result(future: Future[T]) -> T:
    """`future.result()` that ends at a stop signal (raising as `check` does)."""
    wait_futures([future], return_when="ALL_COMPLETED")
    return future.result()


def wait_process(proc: "subprocess.Popen[Any]", timeout: float | None = None) -> int:
    """`proc.wait(timeout)` that ends at a stop signal (raising as `check` does; the caller
    decides what happens to the child). Raises `subprocess.TimeoutExpired` like `wait`."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        check()
        left = SLICE_S if deadline is None else min(SLICE_S, deadline - time.monotonic())
        if left <= 0:
            raise subprocess.TimeoutExpired(proc.args, timeout or 0.0)
        try:
            return proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            continue


def settle_threads(grace_s: float = 20.0, sweep: Callable[[], object] = lambda: None) -> bool:
    """After a stop: keep calling `sweep` (the CLI passes `sandbox.docker.remove_own_containers`)
    while other non-daemon threads finish, up to `grace_s`. Returns True when only the main
    thread (and daemons) remain."""
    deadline = time.monotonic() + grace_s
    while True:
        sweep()
        others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
        if not others:
            return True
        if time.monotonic() >= deadline:
            sweep()
            return False
        for t in others:
            t.join(timeout=0.5)


def run_stoppable(cmd: list[str], poll_s: float = 0.5) -> "subprocess.CompletedProcess[str]":
    """`subprocess.run(cmd, capture_output=True, text=True)` that a stop signal ends: the child
    (an ffmpeg cut) is killed and `Interrupted` (main thread) or `Cancelled` (a worker thread,
    which never sees the signal itself) raised, so the caller's clean-up runs instead of
    waiting for it."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        while True:
            try:
                out, err = proc.communicate(timeout=min(poll_s, SLICE_S * 2))
                return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
            except subprocess.TimeoutExpired:
                if stopping():
                    if _received and threading.current_thread() is threading.main_thread():
                        answered()
                        raise interrupted() from None
                    raise Cancelled(f"{cmd[0]} stopped: statebox is stopping") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
