"""Host-side session recording: events are appended to disk the moment they happen.

Isolation rule 4: the session log is written by the host as the agent runs, so
nothing the agent does inside its container can rewrite it, and a killed run
keeps everything up to the kill. Every agent records through this class; its
`events.jsonl` is the one normalised log the auditor and the report read.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from statebox.schema import AttemptStatus, Event, EventKind, FrameAccount, Session, Usage

EVENTS_FILE = "events.jsonl"


class SessionRecorder:
    """Appends `Event`s to `attempt_dir/events.jsonl` (flushed per line) and keeps them in memory."""

    def __init__(self, attempt_dir: Path, started_at: float | None = None) -> None:
        self.attempt_dir = Path(attempt_dir)
        self.attempt_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.attempt_dir / EVENTS_FILE
        self.started_at = started_at if started_at is not None else time.time()
        self.events: list[Event] = []
        self.frames = FrameAccount()
        self.usage = Usage()
        self._lock = threading.Lock()
        self._fh = self.path.open("a", encoding="utf-8")

    def add(
        self,
        kind: EventKind | str,
        text: str = "",
        *,
        source: str = "",
        line: int | None = None,
        data: dict[str, Any] | None = None,
    ) -> Event:
        """Record one event now; returns it (with its sequence number)."""
        with self._lock:
            event = Event(
                seq=len(self.events),
                kind=EventKind(kind),
                time=round(time.time() - self.started_at, 3),
                source=source,
                line=line,
                text=text,
                data=data or {},
            )
            self.events.append(event)
            self._fh.write(event.model_dump_json() + "\n")
            self._fh.flush()
            return event

    def add_frames(self, *, decoded: list[float] | None = None, model_visible: list[float] | None = None) -> None:
        """Frame accounting: which timestamps were decoded, and which were shown to a model."""
        with self._lock:
            if decoded:
                self.frames.decoded.extend(decoded)
            if model_visible:
                self.frames.model_visible.extend(model_visible)
                self.frames.images_sent += len(model_visible)
        self.add(EventKind.frames, data={"decoded": decoded or [], "model_visible": model_visible or []})

    def add_usage(self, input_tokens: int = 0, output_tokens: int = 0, cost_usd: float = 0.0) -> None:
        with self._lock:
            self.usage.input_tokens += input_tokens
            self.usage.output_tokens += output_tokens
            self.usage.cost_usd += cost_usd
            self.usage.requests += 1

    def session(
        self,
        attempt_id: str,
        agent: str,
        *,
        status: AttemptStatus = "ok",
        reason: str = "",
        response: str = "",
        raw_logs: list[str] | None = None,
        usage: Usage | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Session:
        """The attempt's `Session` as recorded so far: every agent ends with this one call."""
        with self._lock:
            return Session(
                attempt_id=attempt_id,
                agent=agent,
                status=status,
                reason=reason,
                response=response,
                events=list(self.events),
                raw_logs=raw_logs if raw_logs is not None else [EVENTS_FILE],
                frames=self.frames.model_copy(deep=True),
                usage=(usage or self.usage).model_copy(),
                started_at=self.started_at,
                duration_s=round(time.time() - self.started_at, 3),
                meta=meta or {},
            )

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def __enter__(self) -> "SessionRecorder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_events(attempt_dir: Path) -> list[Event]:
    """Read back a recorded session; a torn last line (killed mid-write) is ignored."""
    path = Path(attempt_dir) / EVENTS_FILE
    events: list[Event] = []
    if not path.exists():
        return events
    for raw in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(Event.model_validate(json.loads(raw)))
        except (json.JSONDecodeError, ValueError):
            continue
    return events
