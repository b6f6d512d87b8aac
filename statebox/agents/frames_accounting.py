"""Frame accounting: which moments of the video an attempt decoded, and which a model saw.

lmms-eval's main reproducibility complaint is frame-count mismatch; agentic runs
make it worse (an agent may look at 5 frames or 500). statebox therefore stores,
with every session, the decoded timestamps and the model-visible ones, and the
report puts "frames seen" and "model-visible frames" next to the score.

- Host-side agents (mllm, video-agent) know exactly what they decode and send; they
  record it live through `SessionRecorder.add_frames`.
- Coding agents (Claude Code, Codex) decode inside the sandbox by themselves. What
  they decoded is recovered from their session: every `vtools` call prints a JSON
  report with `decoded_times`, and frame files are named by timestamp
  (`frame_t0001.500.jpg`). What a model saw is recovered from `gateway.jsonl`: every
  image in every request (the gateway keeps each image's sha256), de-duplicated because
  each request repeats the conversation so far, and dated by the label or the file
  name that came with it (a text part "t=1.500s" right before it, or the path the
  agent's Read / view_image call opened).

The same parser reads raw request bodies (tests, the scripted server) and the
gateway's summarised ones, so both sides of "what was sent" are counted alike.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from statebox.attempt_folder import GATEWAY_LOG
from statebox.json_text import json_value, jsonl_lines
from statebox.schema import Event, EventKind, FrameAccount, Session

# "frame_t0001.500.jpg", "crop_t0012.250.png", "grid_t0000.000-0059.967.jpg" (first time only)
FILE_TIME = re.compile(r"(?:frame|crop)_t(\d+(?:\.\d+)?)\.(?:jpe?g|png)\b", re.I)
# The label host-side agents put before each image: "[frame t=12.500s]"
LABEL_TIME = re.compile(r"\bt\s*=\s*(\d+(?:\.\d+)?)\s*s\b")
DECODER_HINTS = re.compile(r"\b(ffmpeg|cv2\.VideoCapture|VideoCapture|av\.open|decord|imageio|moviepy|torchvision\.io)\b")


@dataclass(frozen=True)
class SeenImage:
    """One image in one request: a stable key (sha256) and the video times it shows."""

    key: str
    times: tuple[float, ...] = ()


@dataclass
class RequestImages:
    api: str
    images: list[SeenImage] = field(default_factory=list)


def _sha_of(value: Any) -> str:
    """sha256 of an image payload: raw base64 / data URL, or the gateway's {"image": {"sha256"}} summary."""
    if isinstance(value, dict):
        summary = value.get("image") if isinstance(value.get("image"), dict) else value
        if isinstance(summary, dict) and summary.get("sha256"):
            return str(summary["sha256"])
        return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()
    text = str(value or "")
    if text.startswith("data:") and "," in text:
        text = text.split(",", 1)[1]
    try:
        raw = base64.b64decode(text, validate=False)
    except ValueError:
        raw = text.encode()
    return hashlib.sha256(raw).hexdigest()


def times_in_text(text: str) -> list[float]:
    """Video times named in a text: frame labels ("t=1.5s") or frame file names."""
    found = [float(m) for m in LABEL_TIME.findall(text)]
    found += [float(m) for m in FILE_TIME.findall(text)]
    return found


def _image_payload(part: dict[str, Any]) -> Any | None:
    """The payload of an image part in any of the three wire formats, else None."""
    kind = part.get("type")
    if kind == "image":
        source = part.get("source") or {}
        return source.get("data") if source.get("type", "base64") == "base64" else source.get("url")
    if kind == "image_url":
        url = part.get("image_url")
        return url.get("url") if isinstance(url, dict) else url
    if kind == "input_image":
        return part.get("image_url") or part.get("file_id")
    return None


class _Walker:
    """Walks one request body in order, pairing each image with the times that label it."""

    def __init__(self) -> None:
        self.images: list[SeenImage] = []
        self.call_times: dict[str, tuple[float, ...]] = {}  # tool call id -> times in its arguments
        self.last_call_times: tuple[float, ...] = ()

    def content(self, parts: Any, inherited: tuple[float, ...] = ()) -> None:
        if isinstance(parts, str) or not isinstance(parts, list):
            return
        pending_label: tuple[float, ...] = ()
        for part in parts:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            payload = _image_payload(part)
            if payload is not None:
                times = pending_label or inherited or self.last_call_times
                self.images.append(SeenImage(_sha_of(payload), tuple(times)))
                pending_label = ()
                continue
            if kind in ("text", "input_text", "output_text"):
                found = times_in_text(str(part.get("text", "")))
                pending_label = tuple(found[-1:]) if found else ()
            elif kind == "tool_use":
                times = tuple(times_in_text(json.dumps(part.get("input") or {})))
                self.call_times[str(part.get("id", ""))] = times
                if times:
                    self.last_call_times = times
            elif kind == "tool_result":
                self.content(part.get("content"), self.call_times.get(str(part.get("tool_use_id", "")), ()))

    def responses_item(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if kind in ("function_call", "custom_tool_call", "local_shell_call"):
            times = tuple(times_in_text(str(item.get("arguments") or item.get("input") or item.get("action") or "")))
            self.call_times[str(item.get("call_id", ""))] = times
            if times:
                self.last_call_times = times
        elif kind and str(kind).endswith("call_output"):
            self.content(item.get("output"), self.call_times.get(str(item.get("call_id", "")), ()))
        elif "content" in item:
            self.content(item.get("content"))

    def chat_message(self, msg: dict[str, Any]) -> None:
        for call in msg.get("tool_calls") or []:
            if isinstance(call, dict):
                times = tuple(times_in_text(str((call.get("function") or {}).get("arguments", ""))))
                self.call_times[str(call.get("id", ""))] = times
                if times:
                    self.last_call_times = times
        inherited = self.call_times.get(str(msg.get("tool_call_id", "")), ()) if msg.get("role") == "tool" else ()
        self.content(msg.get("content"), inherited)


def request_images(body: dict[str, Any], api: str | None = None) -> RequestImages:
    """Every image of a request body, in order, with its times (raw or gateway-summarised body)."""
    walker = _Walker()
    if isinstance(body.get("input"), list):
        api = api or "responses"
        for item in body["input"]:
            if isinstance(item, dict):
                walker.responses_item(item)
    else:
        for msg in body.get("messages") or []:
            if not isinstance(msg, dict):
                continue
            if api == "chat" or msg.get("role") in ("system", "tool") or "tool_calls" in msg:
                walker.chat_message(msg)
            else:
                walker.content(msg.get("content"))
        api = api or "messages"
    return RequestImages(api=api or "", images=walker.images)


@dataclass
class ModelVisible:
    """What the model saw over a whole session."""

    images_sent: int = 0  # distinct images
    times: list[float] = field(default_factory=list)  # one entry per distinct dated image (a grid: several)
    undated: int = 0  # distinct images whose moment could not be told
    per_request: list[int] = field(default_factory=list)  # images in each request (with repeats)


def model_visible_from_bodies(bodies: Iterable[tuple[str | None, dict[str, Any]]]) -> ModelVisible:
    seen: set[str] = set()
    out = ModelVisible()
    for api, body in bodies:
        found = request_images(body, api)
        out.per_request.append(len(found.images))
        for image in found.images:
            if image.key in seen:
                continue
            seen.add(image.key)
            out.images_sent += 1
            if image.times:
                out.times.extend(image.times)
            else:
                out.undated += 1
    out.times.sort()
    return out


def gateway_bodies(log_path: Path) -> list[tuple[str | None, dict[str, Any]]]:
    """Request bodies of the generation calls in a gateway.jsonl (torn lines skipped)."""
    bodies: list[tuple[str | None, dict[str, Any]]] = []
    if not Path(log_path).exists():
        return bodies
    for raw in jsonl_lines(Path(log_path).read_text(encoding="utf-8", errors="replace")):  # the log holds U+2028 unescaped
        try:
            record = json_value(raw)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("api") and isinstance(record.get("request"), dict):
            bodies.append((record.get("api"), record["request"]))
    return bodies


def decoded_from_text(text: str) -> list[float]:
    """Decoded times in a tool output: vtools JSON reports, else frame files named by time."""
    times: list[float] = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith('{"tool":"vtools"') or line.startswith('{"tool": "vtools"'):
            try:
                report = json_value(line)
            except json.JSONDecodeError:
                continue
            times.extend(float(t) for t in report.get("decoded_times") or [])
    if not times:
        times = [float(t) for t in FILE_TIME.findall(text)]
    return times


@dataclass
class DecodedSummary:
    times: list[float] = field(default_factory=list)
    untracked_commands: list[int] = field(default_factory=list)  # event seqs that decoded outside vtools


def decoded_from_events(events: Iterable[Event]) -> DecodedSummary:
    out = DecodedSummary()
    seen: set[float] = set()
    for event in events:
        if event.kind == EventKind.tool_output:
            for t in decoded_from_text(event.text):
                key = round(t, 6)
                if key not in seen:
                    seen.add(key)
                    out.times.append(key)
        elif event.kind in (EventKind.shell_command, EventKind.tool_call, EventKind.file_write):
            if DECODER_HINTS.search(event.text) and "vtools" not in event.text:
                out.untracked_commands.append(event.seq)
    out.times.sort()
    return out


def account_for_session(events: Iterable[Event], attempt_dir: Path) -> tuple[FrameAccount, dict[str, Any]]:
    """A coding agent's FrameAccount from its events and gateway log, plus notes for the report.

    A frame that reached the model was necessarily decoded, so model-visible times are
    also counted as decoded (an agent may have decoded them with its own ffmpeg call).
    """
    events = list(events)
    decoded = decoded_from_events(events)
    visible = model_visible_from_bodies(gateway_bodies(Path(attempt_dir) / GATEWAY_LOG))
    all_decoded = sorted({*decoded.times, *(round(t, 6) for t in visible.times)})
    account = FrameAccount(decoded=all_decoded, model_visible=visible.times, images_sent=visible.images_sent)
    notes = {
        "undated_images": visible.undated,
        "images_per_request": visible.per_request,
        "untracked_decoding_events": decoded.untracked_commands,
    }
    return account, notes


def with_frame_account(session: Session, attempt_dir: Path) -> Session:
    """The session with its FrameAccount filled in from its events and gateway log.

    Host-side agents record frames live; a session that recorded none (a coding agent)
    gets the account derived from what it did. Call it on every finished session
    (the coding-agent runner, or the harness before storing the row).
    """
    if session.frames.decoded or session.frames.model_visible or session.frames.images_sent:
        return session
    account, notes = account_for_session(session.events, attempt_dir)
    return session.model_copy(update={"frames": account, "meta": {**session.meta, "frame_accounting": notes}})
