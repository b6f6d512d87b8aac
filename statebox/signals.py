"""SIGINT, SIGTERM and SIGHUP: one clean way out for every statebox command.

`install()` (called once by `statebox.cli.main`) makes all three raise `Interrupted` in
the main thread, so a `kill`, a closed terminal and Ctrl-C take the same path: every
`finally` runs (containers removed by `SandboxEngine.run`, workspaces cleaned, the
gateway closed), the store keeps every row already written, and the CLI prints one line
and exits 128 + the signal number (130 / 143 / 129).

`Interrupted` is a `BaseException` but deliberately not a `KeyboardInterrupt`: click
turns a KeyboardInterrupt into "Aborted!" and exit 1, and `except Exception` in agent
code must not swallow it either.

Worker threads never see a signal. Code that runs work in threads (the harness runner)
catches `Interrupted` in the main thread, sets its cancel event (workers then raise
`Cancelled` at their next check instead of starting anything new) and removes its own
containers (`sandbox/docker.py:remove_own_containers`); `cli.main` repeats that sweep for
this process as a backstop for any other command that starts containers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from typing import Any, Callable

HANDLED = ("SIGINT", "SIGTERM", "SIGHUP")
FORCE_AFTER = 3  # the third signal while stopping exits at once (cleanup is bounded anyway)

_received: list[int] = []
_stopping = threading.Event()


class Interrupted(BaseException):
    """A stop signal arrived; raised in the main thread where the signal was handled."""

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
    return _stopping.is_set()


def _handler(signum: int, frame: Any) -> None:
    _received.append(signum)
    _stopping.set()
    if len(_received) >= FORCE_AFTER:
        os._exit(128 + signum)
    if len(_received) == 1:
        raise Interrupted(signum)
    # a second signal while stopping: ignored, the clean-up already under way is bounded


def install() -> None:
    """Route SIGINT/SIGTERM/SIGHUP to `Interrupted` (main thread only; an ignored SIGHUP,
    as under nohup, stays ignored)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for name in HANDLED:
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        if name == "SIGHUP" and signal.getsignal(signum) == signal.SIG_IGN:
            continue
        signal.signal(signum, _handler)


def reset_for_tests() -> None:
    _received.clear()
    _stopping.clear()


def settle_threads(grace_s: float = 20.0, sweep: Callable[[], Any] = lambda: None) -> bool:
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
    (an ffmpeg cut in a worker thread, which never sees the signal itself) is killed and
    `Cancelled` raised, so the caller's clean-up runs instead of waiting for it."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        while True:
            try:
                out, err = proc.communicate(timeout=poll_s)
                return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
            except subprocess.TimeoutExpired:
                if stopping():
                    raise Cancelled(f"{cmd[0]} stopped: statebox is stopping") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
