"""The cyclic garbage collector paused around work that makes many objects and no reference cycles.

Why its own module: the scorer, the auditor and the report each pause it while they load, and the auditor must not
import the scoring package for it (that package imports numpy: a tenth of a second of every `statebox audit`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Loading and scoring allocate millions of short-lived tuples, dicts and strings and no
    reference cycles; the cyclic collector would otherwise re-scan every object already loaded
    on each allocation burst (reading a million predictions took 4x longer with it running)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
