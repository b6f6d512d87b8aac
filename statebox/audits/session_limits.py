"""How much of one session the auditor reads, and what it says of a session that holds more.

Why limits: the auditor holds a session whole, and the agent sets its size. Each event it parses is ~1.7 KB of
memory, and each place a tool output shows becomes a derived event of its own (up to 200 per output): measured
before these limits, a 9.9 MB `events.jsonl` of 2,000 listings took 749 MB, 16 MB of tiny events 397 MB, and a
27.6 MB log of 60,000 code walks 1.0 GB and 24 s. statebox's own runs cap `events.jsonl` at 32 MB, which still let
an agent reach gigabytes; a handed-over file is capped only at 2 GiB.

Why a verdict rather than an error: a session past a limit is read up to it, and the part read is judged as
usual, plus one `audit_limit` finding (medium: suspicious at least, so flagged, left out of the clean-only score and
counted wrong when flagged attempts are). Stopping the audit instead would let an agent that floods its own log
end the audit of the whole run; reading on would let it exhaust memory; passing the unread rest would let it hide
the cheat past the cut. So the limit fails closed for that attempt alone.

The limits are far above what an honest session reaches: the held-out sessions, recorded from the real CLIs,
hold at most 49 lines of `events.jsonl`; a session of a thousand tool calls would hold a few thousand."""

from __future__ import annotations

SESSION_LINE_LIMIT = 50_000  # lines of one session file parsed (cut at `\n`; a line of events.jsonl is one event)
# events one session's logs together may bring to the rules: room for the witness logs beside a full events.jsonl,
# so the fast path (candidate lines only) and the full one (every line) cut at the same line of a flooded log
SESSION_EVENT_LIMIT = 2 * SESSION_LINE_LIMIT
DERIVED_EVENT_LIMIT = 100_000  # events derivation may add to one session (commands' accesses, outputs' places)
# bytes of one session held as a single JSON document (a Harbor trajectory.json), which cannot be cut by lines: its
# JSON is read whole as Python objects (8x its bytes for small steps), and only its first SESSION_LINE_LIMIT steps
# then become models and events
DOCUMENT_BYTES_LIMIT = 256 << 20

AUDIT_LIMIT_RULE = "session past the audit's limits: read in part, the rest unjudged"


def first_lines(data: bytes, limit: int) -> tuple[bytes, int | None]:
    """`data` cut after its `limit`-th line (newline kept), and how many lines it holds when that is more than
    `limit`; else `data` itself and None. A last line without a newline counts as a line.

    A file of at most `limit` bytes holds at most `limit` lines and is not counted (most are: 3 ms of a 0.3 s audit
    went to counting them); a longer one costs one C pass, and only a file past the limit is walked to its cut."""
    if len(data) <= limit:
        return data, None
    newlines = data.count(b"\n")
    lines = newlines + (1 if data and not data.endswith(b"\n") else 0)
    if lines <= limit:
        return data, None
    at = -1
    for _ in range(limit):
        at = data.find(b"\n", at + 1)
    return data[:at + 1], lines


def cut_to_lines(data: bytes, source: str, notes: list[str] | None) -> tuple[bytes, bool]:
    """`data` up to SESSION_LINE_LIMIT lines (`first_lines`), and whether it was cut; `notes` (`AuditLog.limits`)
    is told of a cut. The one place a session file's lines are limited, whichever reader holds it."""
    data, lines = first_lines(data, SESSION_LINE_LIMIT)
    if lines is None:
        return data, False
    if notes is not None:
        notes.append(past_lines(source, lines, SESSION_LINE_LIMIT))
    return data, True


def past_lines(source: str, lines: int, limit: int) -> str:
    """The note a session file cut by `first_lines` leaves (`AuditLog.limits`)."""
    return f"{source}: {lines:,} lines, the audit read the first {limit:,}"


def past_bytes(source: str, size: int, limit: int) -> str:
    """The note a session file over `limit` bytes leaves: none of it is read."""
    return f"{source}: over {limit:,} bytes ({size:,} or more), the most the audit reads of this session file; not read"


def past_steps(source: str, steps: int, limit: int) -> str:
    return f"{source}: {steps:,} steps, the audit read the first {limit:,}"


def past_events(events: int, limit: int) -> str:
    return f"{events:,} events, the audit read the first {limit:,}"


def past_derived(limit: int) -> str:
    return f"the places its actions and outputs imply passed {limit:,}; later events' places were not derived"


def unrecorded_line(source: str, line: int | None, error: str) -> str:
    """What a session says of a line of the agent's stream statebox failed to record (`schema.UNREAD_LINE`)."""
    return (f"line {line} of {source} was not recorded (statebox failed on it while the agent ran: {error}); what "
            "it held is in no event, so it is unjudged")


def unread_item(source: str, line: int | None, what: str) -> str:
    """What a session says of model I/O its reader does not read (`schema.UNREAD_ITEM`, `sessions.unread_draft`)."""
    return (f"line {line} of {source} holds {what}, which the audit does not read: its text is read as output, what "
            "it did is unjudged")
