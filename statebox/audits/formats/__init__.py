"""Parsers from agents' native raw logs to normalised session events.

Each module turns one native line format (Claude Code's stream-json, Codex's exec
JSONL, ...) into `EventDraft`s: the agent uses them live while the CLI runs, and the
auditor uses the same functions offline to re-normalise a raw log, so both always
agree on what a line means.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
