"""Reading a gateway log line without parsing again the conversation items an earlier line already held.

Every request re-sends the whole conversation, so a kept line mostly starts with the same bytes as the
log's kept line before it (on the perf corpus 7.5 of 25 MB of kept lines are not such a shared prefix).
Parsing those bytes again gives the same items; this module skips them, and gives exactly what parsing
the whole line gives, or nothing (the caller then parses the whole line).

What is known per conversation (`Known`): the bytes [a, b) of a line already read are exactly a run of
whole JSON values, `items`. That is proved, never assumed: by parsing `[` + those bytes + `]` when first
learnt (orjson accepts nothing but whole values separated by commas there), and when it grows by parsing
`[0` + the added bytes + `]` (whole values, each after a comma), each time nested as deep as the list can stand in a line, so orjson's
nesting limit refuses them whenever it would refuse the line. `b` always follows a `}` that closes the
last value (an object, so no number can run on past `b`).

For a line whose first b bytes equal the known line's (memcmp), the bytes [a, b') (the known items and the
ones added) are replaced by one string that no line holds (a random token of this process, `SENTINEL`), and
the much shorter text is parsed. A run of whole values and one string both take the parser from "an element
may start" to "an element ended", so the rest of the line parses as it would have; if the sentinel is then
the first element of the `messages` list the normaliser reads, the known and added items stand in its place
and the result is the whole line's parse. Anything else (the sentinel elsewhere, a parse error, no shared
prefix) answers None.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

import orjson

SENTINEL_TEXT = "statebox-splice-" + os.urandom(16).hex()
SENTINEL = b'"' + SENTINEL_TEXT.encode() + b'"'
KEY = b'"messages": ['
ITEM_END = b"}]}]"  # a message object closing its content list, then the messages list closing: `}` ends an item
# the deepest a `messages` list the normaliser reads can stand: the line's object, `request`, one body wrapper
# (`gateway_log._body`), then the list itself
DEPTH = 4
SLOTS = 4  # conversations followed at once (a CLI's subagents interleave their requests with the main one's)


@dataclass
class Known:
    """Line `start` of the data holds, at [start + a, start + b), exactly the whole JSON values `items`."""

    start: int
    a: int
    b: int
    items: list[Any]


def _last_item_end(data: bytes, lo: int, end: int) -> int:
    """A guess at where the line's last conversation item ends (after its `}`), or -1; proved by the caller."""
    stop = data.rfind(b'"response"', lo, end)
    cut = data.rfind(ITEM_END, lo, stop if stop >= 0 else end)
    return cut + 3 if cut >= 0 else -1


_OPEN, _CLOSE = b"[" * (DEPTH - 1), b"]" * (DEPTH - 1)


def _values(*raw: bytes | memoryview) -> list[Any] | None:
    """The values of the JSON array made of the pieces `raw`, parsed as deep as the `messages` list can stand in a
    line (DEPTH), so that orjson's nesting limit refuses them here whenever it would refuse the line. (Pieces, so
    a line's bytes are copied once.)"""
    try:
        parsed = orjson.loads(b"".join((_OPEN, *raw, _CLOSE)))
    except orjson.JSONDecodeError:
        return None
    for _ in range(DEPTH - 1):
        parsed = parsed[0]
    return parsed if isinstance(parsed, list) else None


class Splicer:
    """Per log: the conversations whose items are known, and reading a line with them."""

    def __init__(self, messages_of: Callable[[Any], Any]) -> None:
        self.messages_of = messages_of  # the list the normaliser reads from a parsed line (or anything else)
        self.known: list[Known] = []
        self.learnt = 0
        self.used = 0

    def read(self, data: bytes, view: memoryview, start: int, end: int) -> Any | None:
        """The parse of data[start:end] (`orjson.loads`), built from known items, or None."""
        for slot, known in enumerate(self.known):
            if end - start >= known.b and data.startswith(view[known.start:known.start + known.b], start):
                obj = self._spliced(data, view, start, end, known)
                known = self.known.pop(slot)
                if obj is not None:  # most recently used first; one that failed is forgotten (learnt again if it pays)
                    self.known.insert(0, known)
                    self.used += 1
                return obj
        return None

    def _spliced(self, data: bytes, view: memoryview, start: int, end: int, known: Known) -> Any | None:
        lo = start + known.b
        added: list[Any] = []
        cut = _last_item_end(data, lo, end)
        if cut > lo:
            more = _values(b"[0", view[lo:cut], b"]")
            if more is not None and more and type(more[0]) is int:
                added, lo = more[1:], cut
        try:
            obj = orjson.loads(b"".join((view[start:start + known.a], SENTINEL, view[lo:end])))
        except orjson.JSONDecodeError:
            return None
        messages = self.messages_of(obj)
        if not (isinstance(messages, list) and messages and messages[0] == SENTINEL_TEXT):
            return None
        items = known.items + added
        messages[0:1] = items
        known.start, known.b, known.items = start, lo - start, items
        return obj

    def learn(self, data: bytes, start: int, end: int) -> None:
        """After a line was parsed whole: learn its items, for the lines after it (at most one extra parse of them
        per conversation; not at all once learning has cost more parses than splicing saved)."""
        if self.learnt > self.used + SLOTS:
            return
        at = data.find(KEY, start, end)
        if at < 0:
            return
        a = at + len(KEY)
        b = _last_item_end(data, a, end)
        if b <= a:
            return
        items = _values(b"[", memoryview(data)[a:b], b"]")
        if not items:
            return
        self.learnt += 1
        self.known.insert(0, Known(start, a - start, b - start, items))
        del self.known[SLOTS:]
