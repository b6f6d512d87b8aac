"""Run a `statebox` command with a deadline; one that runs past it is asked where it is before it is killed.

Why: a long end-to-end test that hit its deadline left only `TimeoutExpired` and the first few hundred
characters of the output (pytest abbreviates the locals), so where the command was stuck could not be
told. At the deadline the command gets SIGUSR1 (statebox/signals.py: every thread's stack on stderr, the
command goes on), then SIGTERM (its containers removed), SIGKILL only if that takes too long; the test fails
with the tail of its output and those stacks.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

STATEBOX = [sys.executable, "-m", "statebox.cli"]
STACKS_WAIT_S = 3.0  # faulthandler writes from the handler at once; the wait covers a loaded machine
STOP_WAIT_S = 60.0  # SIGTERM's way out (containers removed) before SIGKILL
CATCH_WAIT_S = 60.0  # a command still starting at its deadline is given this long to install the handler
TAIL_CHARS = 6000


def run_statebox(args: list[str], timeout: float, **popen: object) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(STATEBOX + args, capture_output=True, text=True, timeout=timeout)`, failing the test
    with the output's tail and the command's stacks where it runs past `timeout`."""
    proc = subprocess.Popen(STATEBOX + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # SIGUSR1's default ends a process: it is sent only once the command catches it (statebox's start-up
        # installs the handler; a command still importing at its deadline is waited for, within a bound)
        waited_until = time.monotonic() + CATCH_WAIT_S
        while not catches(proc.pid, signal.SIGUSR1) and proc.poll() is None and time.monotonic() < waited_until:
            time.sleep(0.05)
        if catches(proc.pid, signal.SIGUSR1):
            proc.send_signal(signal.SIGUSR1)
        try:
            out, err = proc.communicate(timeout=STACKS_WAIT_S)
        except subprocess.TimeoutExpired:  # it goes on after the stacks: stopped as a user stops it (its containers
            proc.terminate()               # removed), killed only where that takes too long
            try:
                out, err = proc.communicate(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
        pytest.fail(f"statebox {' '.join(args[:1])} ran past {timeout:.0f} s; stdout's tail:\n{(out or '')[-TAIL_CHARS:]}\n"
                    f"stderr's tail (the stacks at the deadline):\n{(err or '')[-TAIL_CHARS:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler for `signum` (its SigCgt mask in /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) & (1 << (signum - 1)))
