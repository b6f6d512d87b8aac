"""Plain text logs (`stdout.log`, `stderr.log`, any non-JSON session file) -> events.

Each non-empty line is something the agent's process printed, so it becomes a
`tool_output` event: the rules read it only for what the agent *saw* (a canary
value, the original file name), never as an action of the agent.
"""

from __future__ import annotations

from typing import Iterable

from statebox.sessions import EventDraft, clip
from statebox.schema import EventKind


def parse_lines(lines: Iterable[str]) -> list[tuple[int, EventDraft]]:
    out: list[tuple[int, EventDraft]] = []
    for n, raw in enumerate(lines, start=1):
        text = raw.rstrip("\r\n")
        if text.strip():
            out.append((n, EventDraft(EventKind.tool_output, clip(text))))
    return out
