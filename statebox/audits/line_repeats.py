"""Where a line repeats bytes of the line before it: the conversation a gateway log line re-sends.

Every request in `gateway.jsonl` carries the whole conversation so far, plus the same system prompt
and tool list, so line n is mostly byte-for-byte copies of stretches of line n-1 (at other offsets:
headers and timestamps differ). A search for literal values only needs to read what is new in each
line and carry over what it found inside the copied stretches (fastmatch.Literals.lines_in).

A copied stretch starts at the line start or at an anchor (a JSON key that opens one of the long
repeated parts) and runs as long as the bytes are equal to those after the same anchor in the line
before. Anchors only decide how much is skipped, never the answer: a stretch is used only where its
bytes are equal. Comparisons are `bytes.startswith` against a memoryview (memcmp, no copies), and
anchors are looked for in the bytes of the line before that no stretch covers (in a gateway log its
reply, short; the new bytes of a line are mostly tool output, long), then found by `bytes.find` in the line.
"""

from __future__ import annotations

import re

ANCHOR = re.compile(rb'"(?:messages|input|contents|tools)": \[|"(?:system|instructions)": ')
MIN_RUN = 256  # shorter equal stretches are read again (not worth the bookkeeping)


def common_length(data: bytes, view: memoryview, a: int, b: int, limit: int, at_least: int = 0) -> int:
    """The largest k <= limit with data[a:a+k] == data[b:b+k]; 0 when that is below `at_least` (the caller's
    shortest useful stretch: no need to know how short).

    Keeps data[a:a+lo] equal and the first difference (if any) before `hi`, and narrows: first by guessing the
    stretch is all but its last TAILS bytes (a gateway line is all of the line before but for its reply), then
    galloping, then halving, then one XOR of what is left. A comparison that fails stops at the difference,
    so a wrong guess costs no more than the bytes that are equal."""
    if at_least and not data.startswith(view[b:b + min(limit, at_least)], a):
        return 0
    lo, hi = 0, limit
    for tail in TAILS:
        cut = limit - tail
        if cut <= lo:
            break
        if data.startswith(view[b:b + cut], a):
            lo = cut
            break
        hi = cut
    else:
        step = TAILS[-1]
        while hi - lo > step:
            if not data.startswith(view[b + lo:b + lo + step], a + lo):
                hi = lo + step
                break
            lo += step
            step *= 4
    while hi - lo > XOR_SPAN:
        mid = (lo + hi) // 2
        if data.startswith(view[b + lo:b + mid], a + lo):
            lo = mid
        else:
            hi = mid
    return lo + first_difference(view[a + lo:a + hi], view[b + lo:b + hi])


TAILS = (512, 4096)  # the reply lengths guessed first (most fall under the first)
XOR_SPAN = 256  # below this many bytes one XOR of two big-endian integers costs less than halving on


def first_difference(x: memoryview, y: memoryview) -> int:
    """Index of the first byte where two equally long buffers differ (their length when equal): the highest
    set bit of the XOR of their big-endian values lies in that byte."""
    diff = int.from_bytes(x, "big") ^ int.from_bytes(y, "big")
    return len(x) - 1 - (diff.bit_length() - 1) // 8 if diff else len(x)


def repeated_runs(data: bytes, view: memoryview, line: tuple[int, int], before: tuple[int, int]) -> list[tuple[int, int, int]]:
    """(start in `line`, start in `before`, length) of stretches of `line` equal to stretches of `before`,
    in order and not overlapping (absolute offsets into `data`)."""
    start, end = line
    p_start, p_end = before
    runs: list[tuple[int, int, int]] = []
    at, p_at = start, p_start
    while True:
        n = common_length(data, view, at, p_at, min(end - at, p_end - p_at), MIN_RUN)
        if n >= MIN_RUN:
            runs.append((at, p_at, n))
            at, p_at = at + n, p_at + n
        else:
            at, p_at = at + 1, p_at + 1
        while True:  # the next anchor of the line before that this line holds too (after `at`)
            m = ANCHOR.search(data, p_at, p_end)
            if m is None:
                return runs
            found = data.find(m.group(), at, end)
            if found >= 0:
                at, p_at = found, m.start()
                break
            p_at = m.start() + 1
