"""How many processes an audit runs in: `--jobs N` as given, or by default (`AUTO`) one per usable core once
there is enough work to share.

Why all cores by default: `statebox audit` is measured against ripgrep, which searches with every core unless
told otherwise, and a researcher auditing a run of thousands of attempts should not need to know a flag for it.
Why not always: a process pool costs its start (the workers forked, each attempt's row sent back), so a few
attempts are judged sooner in one process. Measured on the perf corpus (`perf/audit_throughput.py`'s attempts,
best of 5, 2 cores): 16 attempts 39 ms in one process and 42 ms in two, 32 attempts 57 and 55 ms, 64 attempts
91 and 74 ms; hence a worker for every `MIN_PER_WORKER` attempt folders (or files), up to the cores.
"""

from __future__ import annotations

import os

AUTO = 0  # `--jobs 0`, the default: `workers` decides
MIN_PER_WORKER = 24  # attempt folders or files a worker should have before one more is worth starting


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, which a container or `taskset` narrows), else all."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity call on this platform
        return os.cpu_count() or 1


def workers(jobs: int, items: int) -> int:
    """`jobs` where it is given (>= 1); for `AUTO`, one per `MIN_PER_WORKER` of `items`, at least 1, at most the
    usable cores."""
    if jobs != AUTO:
        return jobs
    return max(1, min(usable_cores(), items // MIN_PER_WORKER))
