"""Where a line repeats bytes of the line before it: the conversation a gateway log line re-sends.

Every request in `gateway.jsonl` carries the whole conversation so far, plus the same system prompt
and tool list, so line n is mostly byte-for-byte copies of stretches of line n-1 (at other offsets:
headers and timestamps differ). A search for literal values only needs to read what is new in each
line and carry over what it found inside the copied stretches (fastmatch.Literals.lines_in).

A copied stretch starts at the line start or at an anchor (a JSON key that opens one of the long
repeated parts) and runs as long as the bytes are equal to those after the same anchor in the line
before. Anchors only decide how much is skipped, never the answer: a stretch is used only where its
bytes are equal. Comparisons are `bytes.startswith` against a memoryview (memcmp, no copies), and
anchors are looked for only in the bytes no stretch covers.
"""

from __future__ import annotations

import re

ANCHOR = re.compile(rb'"(?:messages|input|contents|tools)": \[|"(?:system|instructions)": ')
MIN_RUN = 256  # shorter equal stretches are read again (not worth the bookkeeping)
TAIL = 4096  # a stretch that is equal but for its last TAIL bytes is found in one more comparison


def common_length(data: bytes, view: memoryview, a: int, b: int, limit: int, at_least: int = 0) -> int:
    """The largest k <= limit with data[a:a+k] == data[b:b+k] (galloping, then halving); 0 when that is
    below `at_least` (the caller's shortest useful stretch: no need to know how short)."""
    if at_least and not data.startswith(view[b:b + min(limit, at_least)], a):
        return 0
    if data.startswith(view[b:b + limit], a):
        return limit  # the whole rest is equal: one comparison
    if limit > 2 * TAIL and data.startswith(view[b:b + limit - TAIL], a):
        # equal but for the tail: what a gateway line mostly is (all of the line before, but for its reply)
        lo, hi = limit - TAIL, limit
    else:
        lo, step, hi = 0, 4096, 0
        while lo < limit:
            hi = min(limit, lo + step)
            if not data.startswith(view[b + lo:b + hi], a + lo):
                break
            lo = hi
            step *= 4
        else:
            return lo
    while hi - lo > 1:  # data[a:a+lo] equal, data[a:a+hi] not
        mid = (lo + hi) // 2
        if data.startswith(view[b + lo:b + mid], a + lo):
            lo = mid
        else:
            hi = mid
    return lo


def repeated_runs(data: bytes, view: memoryview, line: tuple[int, int], before: tuple[int, int]) -> list[tuple[int, int, int]]:
    """(start in `line`, start in `before`, length) of stretches of `line` equal to stretches of `before`,
    in order and not overlapping (absolute offsets into `data`)."""
    start, end = line
    p_start, p_end = before
    runs: list[tuple[int, int, int]] = []
    at, p_at, p_from = start, p_start, p_start
    while True:
        n = common_length(data, view, at, p_at, min(end - at, p_end - p_at), MIN_RUN) if p_at >= 0 else 0
        if n >= MIN_RUN:
            runs.append((at, p_at, n))
            p_from = p_at + n
            at += n
        else:
            at += 1
        m = ANCHOR.search(data, at, end)
        if m is None:
            return runs
        at = m.start()
        p_at = data.find(m.group(), p_from, p_end)
        if p_at < 0:
            p_at = data.find(m.group(), p_start, p_end)
