"""Session normalisers: parsers from agents' native raw logs to normalised session events.

A package of its own below agents and audits (of statebox it imports only `schema` and `json_text`).

Each module turns one native line format (Claude Code's stream-json, Codex's exec
JSONL, ...) into `EventDraft`s: the agent uses them live while the CLI runs, and the
auditor uses the same functions offline to re-normalise a raw log, so both always
agree on what a line means.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from statebox.json_text import json_value
from statebox.schema import UNREAD_ITEM, EventKind


@dataclass(frozen=True)
class EventDraft:
    """A normalised event before it gets a sequence number and a time (the recorder adds those)."""

    kind: EventKind
    text: str = ""
    data: dict[str, Any] = field(default_factory=dict)


# What a line of a CLI's own session file whose bytes hold no trigger can do to the verdict, by its shape (each format's
# `quiet_line`; `audits.session_file_prefilter` reads by them)
QUIET_TEXT = "text"  # the agent's text or thinking only: its events matter only as the final answer
QUIET_CALLS = "calls"  # tool calls only: its events matter only as the session's first action
QUIET_RESULTS = "results"  # tool results only: its events matter only as the end of the text before them
QUIET_NOTHING = "nothing"  # a line that makes no event at all (a UI event copying an item)


def clip(text: str, limit: int = 20_000) -> str:
    """Keep event text bounded: a tool that dumps megabytes must not bloat events.jsonl."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters in the raw log]"


def unread_draft(what: str, item_type: str, item: Any) -> EventDraft:
    """Model I/O of a type this reader does not read (`what`: "a Codex rollout item of type", ...; `item_type`: its
    type): kept as something the agent was shown, its strings as the text, and marked with `schema.UNREAD_ITEM` (what
    and which type).

    Why output and a mark, not the message naming its type every reader had: a message is a prompt, and a prompt is
    never evidence, so what such an item held could never count against the agent, and whatever it did was judged as
    nothing at all. As output its text is read by every output rule; the mark makes the audit flag the session
    (`audit_limit`: suspicious at least, never clean), since what the item did is unjudged. The types each reader knows
    are an allow-list: a CLI or provider that adds one is flagged until a reader learns it."""
    return EventDraft(EventKind.tool_output, clip(strings_of(item)), {UNREAD_ITEM: f"{what} {item_type[:80]!r}"})


def strings_of(value: Any) -> str:
    """Every string and number in a JSON value, in document order, one a line, each as it reads (a listing in a string
    keeps its lines, where the value's JSON would show them as `\\n`). A stack, not recursion: the value is the file's."""
    out: list[str] = []
    stack = [value]
    while stack:
        top = stack.pop()
        if isinstance(top, str):
            out.append(top)
        elif isinstance(top, dict):
            stack.extend(reversed(list(top.values())))
        elif isinstance(top, list):
            stack.extend(reversed(top))
        elif top is not None and not isinstance(top, bool):
            out.append(str(top))
    return "\n".join(out)


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
