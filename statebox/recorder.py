"""Host-side session recording: events are appended to disk the moment they happen.

Isolation rule 4: the session log is written by the host as the agent runs, so
nothing the agent does inside its container can rewrite it, and a killed run
keeps everything up to the kill. Every agent records through this class; its
`events.jsonl` is the one normalised log the auditor and the report read.

Caps (the policy's `recording:`; the writer is statebox/capped_log.py): an agent
decides how much it prints, so neither the file nor the host's memory may follow it.

- One events.jsonl line is at most `event_bytes`: a longer text is clipped, long
  strings and lists inside `data` are shortened, and the event says so
  (`data.statebox_clipped`). Every line stays one valid event.
- events.jsonl is at most `events_bytes`. The first event that does not fit writes
  one marker event instead (kind `message`, role `harness`,
  `data.statebox == "cap_reached"`); later events are counted, not written, except
  statebox's own closing ones (`final_answer`, `error` and notes that a raw log was
  capped, recorded with no raw `line`), which may use a small reserve kept under the cap.
- In memory the recorder keeps at most `session_events` events (the first half and
  the most recent half) and bytes bounded by the same caps; `session()` returns
  those, with what was left out counted in `meta["recording"]`. events.jsonl on disk
  is the complete record up to its cap.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from pydantic_core import PydanticSerializationError

from statebox.attempt_folder import EVENTS_FILE
from statebox.capped_log import CAP_REACHED, CappedFile, cap_marker, clip_text, is_marker
from statebox.json_text import well_formed
from statebox.policies.model import Recording
from statebox.schema import AttemptStatus, Event, EventKind, FrameAccount, Session, Usage

CLOSING_KINDS = frozenset({EventKind.final_answer, EventKind.error})
MAX_FRAME_TIMES = 100_000  # per frame-account list: frame accounting is bounded like everything else
_CLIP_INFO = "statebox_clipped"


class SessionRecorder:
    """Appends `Event`s to `attempt_dir/events.jsonl` (flushed per line), capped; keeps a bounded few in memory."""

    def __init__(self, attempt_dir: Path, started_at: float | None = None, limits: Recording | None = None) -> None:
        self.attempt_dir = Path(attempt_dir)
        self.attempt_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.attempt_dir / EVENTS_FILE
        self.started_at = started_at if started_at is not None else time.time()
        self.limits = limits if limits is not None else Recording()
        lim = self.limits
        self.line_cap = lim.event_bytes
        # room under the cap kept for the marker and the closing events (final answer, errors, cap notes)
        reserve = min(max(8 * lim.event_bytes, 64 * 1024), lim.events_bytes // 4)
        self.file = CappedFile(self.path, lim.events_bytes, name=EVENTS_FILE, reserve=reserve)
        self.frames = FrameAccount()
        self.usage = Usage()
        self._lock = threading.Lock()
        self._seq = 0
        # memory: the first events and the latest ones, each half bounded in count and bytes
        memory_bytes = min(lim.events_bytes, lim.session_events * lim.event_bytes)
        self._head: list[Event] = []
        self._head_open = True
        self._head_max = lim.session_events // 2
        self._head_bytes_max = memory_bytes // 2
        self._head_bytes = 0
        self._tail: deque[tuple[Event, int]] = deque()
        self._tail_max = lim.session_events - self._head_max
        self._tail_bytes_max = memory_bytes - self._head_bytes_max
        self._tail_bytes = 0
        self.dropped = 0  # events not written (events.jsonl was full)
        self.forgotten = 0  # events written but no longer held in memory
        self.clipped = 0  # events whose text/data were clipped to fit one line
        self.capped_logs: dict[str, dict[str, Any]] = {}

    # ------------------------------------------------------------ recording

    @property
    def events(self) -> list[Event]:
        """The events held in memory (all of them, unless the session outgrew `session_events`)."""
        with self._lock:
            return self._kept()

    def _kept(self) -> list[Event]:
        return self._head + [e for e, _ in self._tail]

    def add(
        self,
        kind: EventKind | str,
        text: str = "",
        *,
        source: str = "",
        line: int | None = None,
        data: dict[str, Any] | None = None,
    ) -> Event | None:
        """Record one event now; returns it (with its sequence number), or None when the cap dropped it."""
        kind = EventKind(kind)
        data = data or {}
        # only statebox's own closing events may use the reserve: events parsed from an agent's output
        # carry the raw line they came from, so a flood of `error` lines cannot spend it
        closing = line is None and (kind in CLOSING_KINDS or is_marker(data))
        with self._lock:
            if self.file.capped and not closing:  # the flood path: one comparison per event
                self.dropped += 1
                return None
            event = self._event(kind, text, source, line, data)
            raw = self._fit(event)
            if not self.file.capped:
                if self.file.fits(len(raw)):
                    self.file.write(raw)
                    return self._accept(event, raw)
                self._cap()
                if not closing:
                    self.dropped += 1
                    return None
                event.seq = self._seq
                raw = self._fit(event)
            if self.file.write(raw, force=True):
                return self._accept(event, raw)
            self.dropped += 1
            return None

    def _event(self, kind: EventKind, text: str, source: str, line: int | None, data: dict[str, Any]) -> Event:
        return Event(seq=self._seq, kind=kind, time=round(time.time() - self.started_at, 3), source=source,
                     line=line, text=text, data=data)

    def _accept(self, event: Event, raw: bytes) -> Event:
        self._seq += 1
        n = len(raw)
        if self._head_open and len(self._head) < self._head_max and self._head_bytes + n <= self._head_bytes_max:
            self._head.append(event)
            self._head_bytes += n
            return event
        self._head_open = False  # from here on events go to the tail, so the order stays head < tail
        self._tail.append((event, n))
        self._tail_bytes += n
        while len(self._tail) > self._tail_max or (self._tail_bytes > self._tail_bytes_max and len(self._tail) > 1):
            _, size = self._tail.popleft()
            self._tail_bytes -= size
            self.forgotten += 1
        return event

    def _cap(self) -> None:
        """events.jsonl is full: write the one marker event."""
        cap = self.limits.events_bytes
        marker = self._event(EventKind.message,
                             f"statebox: {EVENTS_FILE} reached its cap of {cap} bytes; later events were counted, "
                             "not recorded (closing events excepted)",
                             "statebox", None,
                             {"role": "harness", "statebox": CAP_REACHED, "file": EVENTS_FILE, "cap": "file",
                              "cap_bytes": cap})
        raw = self._fit(marker)
        self.file.cap(raw)
        self._accept(marker, raw)

    def _fit(self, event: Event) -> bytes:
        """The event's line, at most `event_bytes` long: text and data clipped (in the event too) when needed."""
        try:
            raw = event.model_dump_json().encode("utf-8") + b"\n"
        except (PydanticSerializationError, UnicodeEncodeError):  # an unpaired surrogate (`json_text.well_formed`)
            _make_well_formed(event)
            raw = event.model_dump_json().encode("utf-8") + b"\n"
        cap = self.line_cap
        if len(raw) <= cap:
            return raw
        self.clipped += 1
        text, data = event.text, event.data
        text_bytes = len(text.encode("utf-8", "surrogatepass"))
        data_bytes = len(_dumps(data))
        info = {"line_bytes": len(raw), "text_bytes": text_bytes, "data_bytes": data_bytes}
        event.source = event.source[:200]
        overhead = len(Event(seq=event.seq, kind=event.kind, time=event.time, source=event.source, line=event.line,
                             data={_CLIP_INFO: info}).model_dump_json()) + 2
        room = max(cap - overhead, 64)
        data_share = min(data_bytes, room // 2) if text_bytes > room // 2 else room - min(text_bytes, room)
        text_limit, data_limit = room - data_share, data_share
        for _ in range(10):
            event.text = clip_text(text, max(text_limit, 0))
            event.data = {**_shrink(data, max(data_limit, 2)), _CLIP_INFO: info}
            raw = event.model_dump_json().encode("utf-8") + b"\n"
            if len(raw) <= cap:
                return raw
            scale = cap / len(raw) * 0.9  # JSON escaping made it longer than its bytes: shrink both
            text_limit, data_limit = int(text_limit * scale), int(data_limit * scale)
        event.text, event.data = "", {_CLIP_INFO: info}
        return event.model_dump_json().encode("utf-8")[: cap - 1] + b"\n"

    # ------------------------------------------------------------ frames, usage, raw-log caps

    def add_frames(self, *, decoded: list[float] | None = None, model_visible: list[float] | None = None) -> None:
        """Frame accounting: which timestamps were decoded, and which were shown to a model."""
        with self._lock:
            if decoded:
                self.frames.decoded.extend(decoded[: max(MAX_FRAME_TIMES - len(self.frames.decoded), 0)])
            if model_visible:
                self.frames.model_visible.extend(
                    model_visible[: max(MAX_FRAME_TIMES - len(self.frames.model_visible), 0)])
                self.frames.images_sent += len(model_visible)
        self.add(EventKind.frames, data={"decoded": decoded or [], "model_visible": model_visible or []})

    def add_usage(self, input_tokens: int = 0, output_tokens: int = 0, cost_usd: float = 0.0) -> None:
        with self._lock:
            self.usage.input_tokens += input_tokens
            self.usage.output_tokens += output_tokens
            self.usage.cost_usd += cost_usd
            self.usage.requests += 1

    def note_capped_logs(self, names: list[str] | tuple[str, ...]) -> list[str]:
        """Record one `cap_reached` event for each raw log in the attempt folder that hit its cap."""
        found = []
        for name in names:
            if name in self.capped_logs:
                continue
            marker = cap_marker(self.attempt_dir / name)
            if marker is None:
                continue
            self.capped_logs[name] = marker
            found.append(name)
            self.add(EventKind.message,
                     f"statebox: {name} reached its cap of {marker.get('cap_bytes')} bytes; the rest of that output "
                     "was counted, not kept",
                     source=name, data={**marker, "role": "harness", "statebox": CAP_REACHED, "file": name})
        return found

    # ------------------------------------------------------------ the end

    def recording_meta(self) -> dict[str, Any]:
        """What the caps left out (empty when nothing was)."""
        with self._lock:
            return self._recording_meta()

    def _recording_meta(self) -> dict[str, Any]:
        if not (self.file.capped or self.dropped or self.forgotten or self.clipped or self.capped_logs):
            return {}
        return {"events_written": self._seq, "events_dropped": self.dropped, "events_not_in_session": self.forgotten,
                "events_clipped": self.clipped, "events_capped": self.file.capped,
                "events_bytes": self.file.size, "capped_logs": sorted(self.capped_logs)}

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
        frames: FrameAccount | None = None,
        started_at: float | None = None,
    ) -> Session:
        """The attempt's `Session` as recorded so far: every agent ends with this one call."""
        with self._lock:
            meta = dict(meta or {})
            recording = self._recording_meta()
            if recording:
                meta["recording"] = recording
            started = started_at if started_at is not None else self.started_at
            return Session(
                attempt_id=attempt_id,
                agent=agent,
                status=status,
                reason=reason,
                response=response,
                events=self._kept(),
                raw_logs=raw_logs if raw_logs is not None else [EVENTS_FILE],
                frames=(frames or self.frames).model_copy(deep=True),
                usage=(usage or self.usage).model_copy(),
                started_at=started,
                duration_s=round(time.time() - started, 3),
                meta=meta,
            )

    def close(self) -> None:
        with self._lock:
            self.file.close()

    def __enter__(self) -> "SessionRecorder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


UNPAIRED_SURROGATES = "statebox_unpaired_surrogates"  # data key: how many an event's text and data held


def _make_well_formed(event: Event) -> None:
    """The event with every unpaired surrogate in its text, source and data written as U+FFFD, and how many
    (`data.statebox_unpaired_surrogates`).

    Why: a string of JSON may hold one (`"\\ud800"`): Claude Code writes a tool call the model put one in as such
    an escape. Such an event could not be written (UTF-8 has no form for
    it), the stream's reader dropped it without a word, and the call went missing from events.jsonl, the log the
    auditor reads first. The raw stream log keeps the line as the CLI wrote it."""
    text, in_text = well_formed(event.text)
    source, in_source = well_formed(event.source)
    data, in_data = well_formed(event.data)
    event.text, event.source = text, source
    event.data = {**data, UNPAIRED_SURROGATES: in_text + in_source + in_data}


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, default=str)


def _shrink(data: dict[str, Any], limit: int) -> dict[str, Any]:
    """`data` with long strings and lists shortened until its JSON is about `limit` bytes; keys are kept."""
    if len(_dumps(data).encode("utf-8", "surrogatepass")) <= limit:
        return data
    str_limit, items = max(limit // 2, 16), max(limit // 32, 4)
    for _ in range(12):
        out = _clip_value(data, str_limit, items, 0)
        if isinstance(out, dict) and len(_dumps(out).encode("utf-8", "surrogatepass")) <= limit:
            return out
        str_limit, items = max(str_limit // 2, 8), max(items // 2, 1)
    preview = _dumps(data)[: max(limit // 2, 0)]
    return {"statebox_preview": preview}


def _clip_value(value: Any, str_limit: int, items: int, depth: int) -> Any:
    if depth > 12:
        return "[statebox: nested too deep]"
    if isinstance(value, str):
        return clip_text(value, str_limit) if len(value) > str_limit // 4 else value
    if isinstance(value, dict):
        out = {str(k)[:200]: _clip_value(v, str_limit, items, depth + 1) for k, v in list(value.items())[:items]}
        if len(value) > items:
            out["statebox_more_keys"] = len(value) - items
        return out
    if isinstance(value, (list, tuple)):
        out_list = [_clip_value(v, str_limit, items, depth + 1) for v in list(value[:items])]
        if len(value) > items:
            out_list.append(f"[statebox: {len(value) - items} more items]")
        return out_list
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return clip_text(str(value), str_limit)


def read_events(attempt_dir: Path, limit: int | None = None) -> list[Event]:
    """Read back a recorded session (at most `limit` events); a torn or clipped line is skipped."""
    path = Path(attempt_dir) / EVENTS_FILE
    events: list[Event] = []
    if not path.exists():
        return events
    with path.open("rb") as fh:
        for raw in fh:
            if limit is not None and len(events) >= limit:
                break
            try:
                events.append(Event.model_validate(json.loads(raw)))
            except (json.JSONDecodeError, ValueError, UnicodeDecodeError):
                continue
    return events
