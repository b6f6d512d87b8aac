"""Naming an OOM kill: the engine's flag can lag the container's exit, so a SIGKILL exit reads it again.

The real kill is covered by the red team's `memory_hog` (a 1.5 GB allocation under a 128 MB
limit must come back as `oom`); it once came back as `error` on a fresh, idle machine, where
the engine had not yet recorded the OOM event when statebox asked. These check the rule that
fixes it with the engine's state as a plain function (no engine needed)."""

from __future__ import annotations

import time

from statebox.sandbox.docker import oom_killed


def _states(*flags: bool):
    """An engine whose OOMKilled flag reads as `flags`, one per call (the last one repeats)."""
    calls = []

    def inspect() -> dict:
        calls.append(time.monotonic())
        return {"OOMKilled": flags[min(len(calls) - 1, len(flags) - 1)]}

    return inspect, calls


def test_a_sigkill_exit_waits_for_the_engine_to_record_the_oom_kill():
    inspect, calls = _states(False, False, False, True)
    assert oom_killed(inspect, 137, wait_s=30.0)
    assert len(calls) == 4  # stopped as soon as the flag came, not at the end of the wait


def test_a_sigkill_without_oom_is_not_called_one_after_the_wait():
    inspect, calls = _states(False)
    began = time.monotonic()
    assert not oom_killed(inspect, 137, wait_s=0.2)
    assert time.monotonic() - began >= 0.2 and len(calls) >= 2  # it read again until the wait was over


def test_other_exit_codes_read_the_flag_once():
    inspect, calls = _states(False, True)
    assert not oom_killed(inspect, 1, wait_s=30.0)
    assert len(calls) == 1
    assert oom_killed(_states(True)[0], 1)


def test_a_container_already_gone_is_not_an_oom():
    def gone() -> dict:
        raise RuntimeError("404 no such container")

    assert not oom_killed(gone, 137, wait_s=30.0)
