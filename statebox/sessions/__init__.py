"""Session normalisers: parsers from agents' native raw logs to normalised session events.

A package of its own below agents and audits (it imports only `statebox.schema` of statebox).

Each module turns one native line format (Claude Code's stream-json, Codex's exec
JSONL, ...) into `EventDraft`s: the agent uses them live while the CLI runs, and the
auditor uses the same functions offline to re-normalise a raw log, so both always
agree on what a line means.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import orjson

from statebox.schema import EventKind


@dataclass(frozen=True)
class EventDraft:
    """A normalised event before it gets a sequence number and a time (the recorder adds those)."""

    kind: EventKind
    text: str = ""
    data: dict[str, Any] = field(default_factory=dict)


def clip(text: str, limit: int = 20_000) -> str:
    """Keep event text bounded: a tool that dumps megabytes must not bloat events.jsonl."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters in the raw log]"


_LONG_DIGITS_TEXT = re.compile(r"[0-9]{19}")
_LONG_DIGITS_BYTES = re.compile(rb"[0-9]{19}")


def json_value(raw: str | bytes) -> Any:
    """`json.loads(raw)` for a log's text, which the agent shapes: read by orjson where that is the same value,
    and too deep a nesting refused like any malformed text.

    Why orjson: every line of a session file is read (~5x json's speed on them). It gives json's value for
    every text it accepts but numbers of 19 digits or more (it may read a wide integer otherwise): those,
    and whatever it refuses (NaN, a number too large for a float, a lone surrogate, a BOM, nesting past
    1,024), go to json.
    Why the refusal: json reads nested arrays by recursion, and a line nested a few thousand deep (a
    tool output the agent printed, the arguments a model wrote) raised RecursionError, which no parser's
    `except ValueError` caught: the audit of that session ended in a traceback, an agent's way to leave
    its own session unjudged. It is now a json.JSONDecodeError (a ValueError), kept as unparsed text."""
    long_digits = _LONG_DIGITS_BYTES.search(raw) if isinstance(raw, bytes) else _LONG_DIGITS_TEXT.search(raw)
    if long_digits is None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(raw)
    except RecursionError:
        text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
        raise json.JSONDecodeError("nested too deeply", text, 0) from None


def parse_json_lines(
    lines: Iterable[str],
    feed: Callable[[dict[str, Any], int], list["EventDraft"]],
    loads: Callable[[str], Any] = json_value,
) -> list[tuple[int, "EventDraft"]]:
    """Normalise a whole raw JSONL log with a per-line `feed`: (1-based line number, draft).

    Torn or non-JSON lines (a log cut by a kill) are kept as unparsed messages, not dropped:
    the auditor must see everything the raw log holds.
    """
    out: list[tuple[int, EventDraft]] = []
    for n, raw in enumerate(lines, start=1):
        out.extend(parse_json_line(n, raw, feed, loads))
    return out


def parse_json_line(
    n: int,
    raw: str,
    feed: Callable[[dict[str, Any], int], list["EventDraft"]],
    loads: Callable[[str], Any] = json_value,
) -> list[tuple[int, "EventDraft"]]:
    """One line of `parse_json_lines` (line number `n`): its drafts, an unparsed message, or nothing (blank)."""
    raw = raw.strip()
    if not raw:
        return []
    try:
        obj = loads(raw)
    except ValueError:  # json.JSONDecodeError is a ValueError
        return [(n, EventDraft(EventKind.message, clip(raw), {"unparsed": True}))]
    return [(n, d) for d in feed(obj, n)] if isinstance(obj, dict) else []
