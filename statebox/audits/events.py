"""Every session format -> one ordered list of `statebox.schema.Event`s, each pointing at its raw line.

Inputs:
- an attempt folder: `events.jsonl` (the host-written normalised log, primary),
  plus independent witnesses beside it: `gateway.jsonl` (every model request and
  reply), `stdout.log`/`stderr.log`, and the response file. The CLI's own raw log
  (`claude.stream.jsonl`, `codex.jsonl`) is read only when `events.jsonl` is
  missing, because the agent already normalised it line by line into events.jsonl;
- a lone session file in any of those formats (detected from its name or lines).

Derived events: commands and code are turned into the accesses they make
(`cat /data/qa.json` -> a file_read of /data/qa.json; `os.walk('/')` -> a listing
of /; `curl ...` -> a network attempt). A derived event shares the `seq`, source
and line of the event it was read from, so a finding always points at what the
agent really did.

Speed: an auditor that reads every byte of 200 MB of sessions through pydantic
would be slower than grep by two orders of magnitude. A prefilter (one combined
pattern, RE2 when installed) finds the lines that could matter; only those
lines are parsed from `events.jsonl`, and a witness log with no candidate line
at all is not parsed. A gateway line kept only for what its reply says is read
from its reply half (`Prefilter.witness_lines` says why).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

import orjson

from statebox.attempt_folder import (ATTEMPT_FILE, CLAUDE_STREAM_LOG, CODEX_LOG, EVENTS_FILE, GATEWAY_LOG, RESPONSE_FILE,
                                     STDERR_LOG, STDOUT_LOG, attempt_file_exists, read_attempt_file)
from statebox.audits import session_limits
from statebox.audits.actions import (API_ROUTE, LISTING_WITNESSES, WORKDIR, Access, accesses, cwd_after, glob_root,
                                     normalise_path, output_accesses, patch_accesses)
from statebox.audits.fastmatch import (AnyLiteral, Literals, NewBytes, Windowed, compile_any, lines_matching_within,
                                       match_bounds, matching_lines)
from statebox.audits.fastmatch import line_runs as line_runs_of
from statebox.audits.lexicon import usable_secret
from statebox.audits.session_limits import cut_to_lines, past_derived, past_events, past_lines
from statebox.audits.shell_runs import is_script
from statebox.errors import DataError, UserError
from statebox.json_text import has_long_digits, json_value
from statebox.schema import ACTION_KINDS, UNREAD_ITEM, UNREAD_LINE, Event, EventKind
from statebox.sessions import EventDraft, claude_stream, codex_jsonl, gateway_log, text_log
from statebox.sessions.shapes import list_of, object_at, text_of
from statebox.userfiles import as_read_text, as_text_file

PROMPT_KINDS = {EventKind.model_request}
AGENT_TEXT_KINDS = {EventKind.model_text, EventKind.model_response, EventKind.final_answer}
OBSERVED_KINDS = {EventKind.tool_output, EventKind.error}

# bash_session: Inspect's stateful shell (its `input` is what it types); write_stdin: Codex types `chars` into a session
SHELL_TOOLS = {"bash", "shell", "exec_command", "local_shell", "run_shell", "terminal", "execute", "python", "run_python", "container.exec",
               "bash_session", "write_stdin"}
WITNESS_LOGS = (GATEWAY_LOG, STDOUT_LOG, STDERR_LOG)
RAW_CLI_LOGS = (CLAUDE_STREAM_LOG, CODEX_LOG)
_T = TypeVar("_T")


_EVENT_FIELDS = frozenset(Event.model_fields)
_new_object = object.__new__
_set_slot = object.__setattr__


def new_event(seq: int, kind: EventKind, source: str, line: int | None, text: str, data: dict[str, Any],
              time: float | None = None) -> Event:
    """`Event.model_construct(seq=..., ..., data=...)` with every field given, without its per-field Python loop.

    Why: the auditor builds tens of events per session from values its parsers made (never from
    the session file's own objects, which go through `Event.model_validate`); model_construct costs
    ~14 us each, this ~1. tests/audits/test_fastmatch.py checks both give the same object (all four
    of pydantic's slots), so a pydantic that stores models differently fails there, not silently."""
    event: Event = _new_object(Event)
    _set_slot(event, "__dict__", {"seq": seq, "kind": kind, "time": time, "source": source, "line": line, "text": text,
                                  "data": data})
    _set_slot(event, "__pydantic_fields_set__", set(_EVENT_FIELDS))
    _set_slot(event, "__pydantic_extra__", {})
    _set_slot(event, "__pydantic_private__", None)
    return event


class FactNotText(UserError):
    """A secret fact that is not text (`AttemptFacts`): the caller names the file it came from."""


@dataclass
class AttemptFacts:
    """What the auditor knows that the agent must not: from attempt.json or CLI flags."""

    attempt_id: str = ""
    agent: str = ""
    item_id: str = ""
    original_name: str = ""
    original_stem: str = ""
    dataset: str = ""
    workspace_video: str = ""
    question: str = ""
    honeytoken_values: list[str] = field(default_factory=list)
    honeytoken_paths: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # only a distinctive decoy path is one (`usable_secret`, as `secret_literals` keeps for the prefilter): "0",
        # "" or "/" is in every text or prefixes every path, so the full reading flagged every line holding it
        # while the fast one never searched for it
        self.honeytoken_paths = [p for p in self.honeytoken_paths if isinstance(p, str) and usable_secret(p)]
        # the facts searched for as literals (`secret_literals`), in the logs' bytes
        for name, values in (("item_id", [self.item_id]), ("original_name", [self.original_name]),
                             ("original_stem", [self.original_stem]), ("honeytoken_values", self.honeytoken_values),
                             ("honeytoken_paths", self.honeytoken_paths)):
            if not all(value.isascii() or _is_text(value) for value in values):
                # a lone surrogate escape (`"\ud800"`, valid JSON): no file statebox writes holds one, the bytes the
                # prefilter searches cannot, and the literal search could not even be compiled (a traceback)
                raise FactNotText(f"session {self.attempt_id!a}: its {name} is not text (a lone surrogate escape)")

    @classmethod
    def from_attempt_json(cls, path: Path, data: bytes | None = None) -> "AttemptFacts":
        """The facts of attempt.json at `path` (its bytes `data` when the caller read them through its door)."""
        raw = _attempt_json(path, data)
        if not isinstance(raw, dict):
            raise DataError(path, None, "attempt.json must be an object")
        # a value of another JSON type than statebox writes reads as absent (sessions.shapes), never as a traceback
        secret, attempt = object_at(raw, "secret"), object_at(raw, "attempt")
        try:
            return cls(
                attempt_id=text_of(raw.get("attempt_id") or path.parent.name),
                agent=text_of(attempt.get("agent") or raw.get("agent") or ""),
                item_id=text_of(secret.get("item_id") or raw.get("item_id") or attempt.get("item_id") or ""),
                original_name=text_of(secret.get("original_name") or ""),
                original_stem=text_of(secret.get("original_stem") or ""),
                dataset=text_of(secret.get("dataset") or attempt.get("dataset") or ""),
                workspace_video=text_of(raw.get("workspace_video") or ""),
                question=text_of(raw.get("question") or ""),
                honeytoken_values=[text_of(v) for v in list_of(secret.get("honeytoken_values"))],
                honeytoken_paths=[v for v in list_of(secret.get("honeytoken_paths")) if isinstance(v, str)],
            )
        except FactNotText as exc:  # named with the file
            raise DataError(path, None, str(exc)) from None


def _is_text(value: str) -> bool:
    """Whether `value` encodes as UTF-8 (holds no lone surrogate)."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _attempt_json(path: Path, data: bytes | None = None) -> Any:
    """attempt.json's object: `json.loads(path.read_text("utf-8"))`, read by orjson where that is the same object.

    Why: ~300 attempts a second pay json's text decoding and its slower reader. orjson gives the same
    object for every document it accepts but one kind: an integer beyond 64 bits becomes a float (and
    `str` of it another string); a run of 19 digits anywhere takes json. Whatever orjson refuses (NaN,
    a lone surrogate, a BOM, bad UTF-8, a syntax error) takes json too, so its answer and its error are
    exactly the old ones."""
    data = read_attempt_file(str(path)) if data is None else data
    if not has_long_digits(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(as_read_text(data, errors="strict"))
    except json.JSONDecodeError as exc:
        raise DataError(path, exc.lineno, f"not valid JSON ({exc.msg})") from exc
    except UnicodeDecodeError as exc:
        raise DataError(path, None, f"not UTF-8 text (byte {exc.start})") from None


@dataclass
class AuditLog:
    """One session, normalised: events in order (derived ones right after their parent)."""

    events: list[Event]
    facts: AttemptFacts
    sources: list[str] = field(default_factory=list)
    # the attempt folder's names when one listing of it answers for the file system (`_Listing.authoritative`),
    # else None: lets the caller skip asking the file system about names the folder does not hold
    folder_names: frozenset[str] | None = field(default=None, repr=False, compare=False)
    # what of the session was left unread, one note per limit passed (session_limits): each is an `audit_limit` finding
    limits: list[str] = field(default_factory=list)
    # what the rules derive from one event (its action text, its accesses), computed once for all rules
    _memo: dict[tuple[str, int], tuple[Event, Any]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def memo(self, name: str, event: Event, compute: Callable[[Event], _T]) -> _T:
        """`compute(event)`, once per event and name (keyed by identity: an event replaced in `events` is recomputed)."""
        key = (name, id(event))
        hit = self._memo.get(key)
        if hit is not None and hit[0] is event:
            return hit[1]
        value = compute(event)
        self._memo[key] = (event, value)
        return value

    @property
    def prompts(self) -> list[str]:
        """The instructions the agent was given (never evidence against it)."""
        return [e.text for e in self.events if is_prompt(e)]

    @property
    def given_prompts(self) -> list[str]:
        """The prompts each log holds before the agent's first action in it: the task as given, the only text
        that may excuse an echo of itself (a name the prompt gave, a term it used).

        Why not every prompt: text a harness shows the agent later can hold what the agent wrote. Claude Code
        renders the agent's own todo list and the CLAUDE.md files it creates as reminders, Codex files a
        compaction summary (the model's words) as system text, a gateway request carries such reminders as
        user text. An agent that put the original video's name in its todo list had every finding of that name
        excused as "the prompt leaked it" (contaminated read as suspicious). Later prompts are still never
        evidence against the agent; they only excuse nothing."""
        acted: set[str] = set()
        given: list[str] = []
        for event in self.events:
            if event.kind in ACTION_KINDS and "derived_from" not in (event.data or {}):
                acted.add(event.source)
            elif event.source not in acted and is_prompt(event):
                given.append(event.text)
        return given


def is_out_of_band(event: Event) -> bool:
    """An event read from a gateway request the agent's own client did not send (see `out_of_band_lines`)."""
    return bool((event.data or {}).get("out_of_band"))


def is_prompt(event: Event) -> bool:
    if is_out_of_band(event):
        return False  # the agent wrote that request itself: its words are evidence, not instructions
    if (event.data or {}).get("unparsed"):
        # a line its format could not read is no prompt the harness gave: a broken gateway line holds the agent's own
        # reply too, and as a "prompt" before the reply's action it excused every echo of itself (clean on the full
        # reading, which keeps it, suspicious on the fast one, which reads only its reply half)
        return False
    if (event.data or {}).get("subagent_task"):
        # what a subagent was handed: the task the agent wrote for it (and a forked subagent's copy of the history),
        # never the task as given; as a prompt before the subagent's first action it excused an echo of itself
        return False
    if event.kind in PROMPT_KINDS:
        return True
    return event.kind is EventKind.message and (event.data or {}).get("role") not in ("assistant",)


def is_agent_text(event: Event) -> bool:
    if is_out_of_band(event):
        return False  # the reply to an out-of-band request is something the agent was told, not said
    return event.kind in AGENT_TEXT_KINDS or (event.kind is EventKind.message and (event.data or {}).get("role") == "assistant")


# ---------------------------------------------------------------------------
# format detection and parsing
# ---------------------------------------------------------------------------

FORMATS = ("events", "claude", "codex", "gateway", "text")


def detect_format(path: Path) -> str:
    """The session format of a file: by its conventional name, else by its first JSON line."""
    name = path.name
    if name == EVENTS_FILE:
        return "events"
    if name.startswith("claude") and name.endswith(".jsonl"):
        return "claude"
    if name.startswith("codex") and name.endswith(".jsonl"):
        return "codex"
    if name.startswith("gateway") and name.endswith(".jsonl"):
        return "gateway"
    if name.endswith((".log", ".txt")):
        return "text"
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        for raw in fh:
            raw = raw.strip()
            if not raw:
                continue
            try:
                obj = json_value(raw)
            except json.JSONDecodeError:
                return "text"
            if not isinstance(obj, dict):
                return "text"
            return sniff_object(obj)
    return "text"


def sniff_object(obj: dict[str, Any]) -> str:
    kind = obj.get("type")
    if "seq" in obj and "kind" in obj:
        return "events"
    if gateway_log.looks_like_gateway(obj):
        return "gateway"
    if kind in ("system", "assistant", "user", "result", "stream_event"):
        return "claude"
    if isinstance(kind, str) and (kind.startswith(("thread.", "turn.", "item.")) or kind == "error"):
        return "codex"
    return "text"


_PARSERS = {"claude": claude_stream, "codex": codex_jsonl, "gateway": gateway_log, "text": text_log}


def _parser(fmt: str) -> Callable[[Iterable[str]], list[tuple[int, EventDraft]]]:
    module = _PARSERS.get(fmt)
    if module is None:  # pragma: no cover - guarded by callers
        raise UserError(f"unknown session format {fmt!r} (known: {', '.join(FORMATS)})")
    return module.parse_lines


def read_session_file(path: Path, fmt: str | None = None, *, first_seq: int = 0,
                      keep: Callable[[int], bool] | None = None, data: bytes | None = None,
                      spans: list[tuple[int, int]] | None = None,
                      reply_only: dict[int, dict[str, Any]] | None = None,
                      limits: list[str] | None = None) -> list[Event]:
    """Events of one file, numbered from `first_seq` (events.jsonl keeps its own numbers).

    `keep(line_no)` (from the prefilter) skips lines that cannot matter; those lines are
    then never even decoded. `data`/`spans`: the file's bytes and line spans when the
    caller already read them for the prefilter (each file is read once). `reply_only`: gateway
    lines of which only the reply half is read (line -> that half, read by `Prefilter.witness_lines`).
    `limits`: told when a file past `SESSION_LINE_LIMIT` lines is read up to it (a gateway log given with its
    `spans` was cut by the caller: `spans_within`).
    """
    fmt = fmt or detect_format(path)
    source = path.name
    data = path.read_bytes() if data is None else data
    if fmt != "gateway" or spans is None:
        data, cut = cut_to_lines(data, source, limits)
        if cut:
            spans = None  # the caller's spans are the whole file's
        if fmt == "events":
            return _read_events_jsonl(path, keep, data, cut=cut)
    if keep is not None and fmt == "gateway":
        # kept lines go to orjson as bytes, without the conversation items read before (gateway_log.parse_kept_lines)
        spans = line_spans(data) if spans is None else spans
        drafts = gateway_log.parse_kept_lines(data, spans, keep, reply_only)
    elif keep is not None and fmt == "text":
        # skipped lines become empty ones (never decoded): the parser keeps its numbering and ignores them
        spans = line_spans(data) if spans is None else spans
        drafts = _parser(fmt)(data[start:end].decode("utf-8", "replace") if keep(n) else ""
                              for n, (start, end) in enumerate(spans, start=1))
    else:  # the bytes read (by the caller, through its door), read as the file would be
        drafts = _parser(fmt)(as_text_file(data))
    events: list[Event] = []
    seq = first_seq
    for line_no, draft in drafts:
        if keep is None or keep(line_no):
            events.append(new_event(seq, draft.kind, source, line_no, draft.text, dict(draft.data)))
        seq += 1
    return events


def line_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of every line of `data`, newline excluded: `data.split(b"\\n")` as offsets, without
    copying a gateway log's long lines (each repeats the whole conversation) only to throw most away."""
    return spans_within(data, sys.maxsize)[1]


def spans_within(data: bytes, limit: int) -> tuple[bytes, list[tuple[int, int]], int | None]:
    """`line_spans(data)` of at most `limit` lines: the data cut after them, their spans, and how many lines the data
    holds when that is more (else None).

    Why not `first_lines`: a gateway log is cut into spans anyway, so counting its lines first would read every byte
    once more (25 ms of a 0.3 s audit); and its spans, cut only after, would hold a tuple per line of a handed-over
    log of empty lines (2 GiB of them: ~240 GB)."""
    spans: list[tuple[int, int]] = []
    find = data.find
    start = 0
    while len(spans) < limit:
        nl = find(b"\n", start)
        if nl < 0:
            spans.append((start, len(data)))
            return data, spans, None
        spans.append((start, nl))
        start = nl + 1
    if start >= len(data):  # the limit-th line ended the data (with its newline)
        spans.append((start, len(data)))  # the empty part after it, as line_spans gives it
        return data, spans, None
    return data[:start], spans + [(start, start)], data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def _read_events_jsonl(path: Path, keep: Callable[[int], bool] | None, data: bytes | None = None,
                       kept: set[int] | None = None, cut: bool = False) -> list[Event]:
    """Events of an events.jsonl. `keep(line_no)`: whether a line may matter. `kept`: the same as a set of
    line numbers; then only those lines are visited, and the shape check of the skipped ones is one pass
    over their first bytes (the first error in the file is still the one raised). `cut`: the data was cut at
    SESSION_LINE_LIMIT (`session_limits.cut_to_lines`, by the caller), so its last line is not the file's."""
    events: list[Event] = []
    lines = (path.read_bytes() if data is None else data).split(b"\n")
    # the last line holding bytes (the split leaves an empty part after a final newline); none when cut short:
    # no line read is the file's last, so none is forgiven as torn
    last = len(lines) if cut else len(lines) - (2 if len(lines) > 1 and not lines[-1] else 1)
    if kept is None:
        for index, raw in enumerate(lines):
            if keep is not None and not keep(index + 1):
                if index < last and _misshapen(raw):  # cheap shape check on skipped lines
                    raise DataError(path, index + 1, "not a session event (not a JSON object)")
                continue
            _read_event_line(path, raw, index, last, events)
        return events
    # a line led by whitespace is stripped before it is parsed (`_read_event_line`), as a kept one is
    bad = next((index for index, raw in enumerate(lines)
                if (raw[:1] != b"{" or raw[-1:] != b"}") and index + 1 not in kept and index < last and _misshapen(raw)), None)
    for index in sorted(n - 1 for n in kept if 0 < n <= len(lines)):
        if bad is not None and bad < index:
            break
        _read_event_line(path, lines[index], index, last, events)
    if bad is not None:
        raise DataError(path, bad + 1, "not a session event (not a JSON object)")
    return events


def _misshapen(raw: bytes) -> bool:
    """Whether a skipped events.jsonl line (not the last) is not blank and, stripped of ASCII whitespace, does not
    both start with `{` and end with `}`: then it is no JSON object, and the full parse refuses the file there.

    Why both ends: a line torn in the middle of the file, or with bytes after its object, starts with `{` like any
    other; only its end tells. A line that is both but is still no event (`{"kind": "nope"}`) is caught only where
    it is parsed. `strip` copies only a line that does not already start and end with a brace."""
    if raw[:1] == b"{" and raw[-1:] == b"}":
        return False
    stripped = raw.strip()
    return bool(stripped) and not (stripped[:1] == b"{" and stripped[-1:] == b"}")


def _read_event_line(path: Path, raw: bytes, index: int, last: int, events: list[Event]) -> None:
    """One kept line of an events.jsonl onto `events` (a blank line or a torn last one adds nothing)."""
    raw = raw.strip()
    if not raw:
        return
    line_no = index + 1
    try:
        obj = _loads(raw)
        event = Event.model_validate(obj)
    except (json.JSONDecodeError, ValueError, UnicodeDecodeError) as exc:
        if index >= last:
            return  # a torn last line from a killed run
        raise DataError(path, line_no, f"not a session event ({str(exc).splitlines()[0][:120]})") from exc
    if not event.source:
        event.source = path.name
    if event.line is None:
        event.line = line_no
        event.data = dict(event.data or {}, events_line=line_no)
    events.append(event)


def _loads(raw: bytes | str) -> Any:
    """orjson (a declared dependency: several times faster on session logs' long lines), failing as json does."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise json.JSONDecodeError(str(exc), raw if isinstance(raw, str) else raw.decode("utf-8", "replace"), 0) from exc


# ---------------------------------------------------------------------------
# derived events
# ---------------------------------------------------------------------------


def event_accesses(event: Event) -> list[Access]:
    """The accesses one action event makes (empty for non-actions)."""
    data = event.data or {}
    kind = event.kind
    if kind is EventKind.shell_command:
        return accesses(event.text)
    if kind is EventKind.tool_call:
        return _tool_call_accesses(event)
    if kind is EventKind.file_read:
        tool = str(data.get("tool", "")).lower()
        path = str(data.get("path") or event.text or "")
        if "derived_from" in data:
            return []
        op = "search" if tool == "grep" else "list" if tool in ("glob", "ls") else str(data.get("op", "read"))
        target = normalise_path(path) if path and not path.startswith(("*", "**")) else "/workspace"
        return [Access(op, target, tool or "read", str(data.get("pattern") or ""))]
    if kind is EventKind.file_write and "derived_from" not in data:
        path = str(data.get("path") or event.text or "")
        return [Access("write", normalise_path(path), str(data.get("tool", "write")))] if path else []
    if kind is EventKind.network_attempt and "derived_from" not in data:
        return [Access("network", str(data.get("url") or data.get("query") or event.text), str(data.get("tool", "network")))]
    return []


_SEARCH_TOOLS = ("grep", "glob")  # tools that search /workspace when given no path
_PATH_KEYS = ("file_path", "path", "notebook_path", "directory", "dir")  # read by the tool's own op (above)
# values that are text, code, a command or a pattern, never a path to touch (each read its own way, or not at all)
_TEXT_KEYS = frozenset(("command", "cmd", "script", "code", "content", "new_string", "old_string", "new_source", "source",
                        "file_text", "new_str", "old_str", "edits",
                        "description", "prompt", "query", "url", "pattern", "glob", "regex", "text", "message", "todos",
                        "type", "subagent_type", "workdir", "cwd"))
# a value that is one absolute, home or parent-relative path: a path's characters (and a glob's) only, so a regex
# (`/\d+/`), a sed expression or a lone separator (`/`) is none
_PATH_VALUE = re.compile(r"^(?:/|~/|\.\./)[\w.~/@%+,:=*?\[\]{}-]+$|^~$")


def _tool_op(tool: str) -> str:
    """What a tool of this name does to a path it is given, as far as its name says."""
    for op, words in _TOOL_OPS:
        if any(word in tool for word in words):
            return op
    return "access"


_TOOL_OPS = (("write", ("write", "edit", "create", "save", "append", "delete", "remove", "mkdir")),
             ("list", ("list", "ls", "dir", "tree", "glob")), ("search", ("search", "grep", "find")),
             ("read", ("read", "open", "view", "cat", "show", "load", "get")))
_WORKDIR_KEYS = ("workdir", "cwd")  # a shell tool's own working directory for its command


def _tool_and_args(event: Event) -> tuple[str, dict[str, Any]]:
    """A tool call's tool name (lower-cased) and its arguments (`input`, else `arguments`; {} when neither is an
    object)."""
    data = event.data or {}
    tool = str(data.get("tool") or data.get("name") or "").lower()
    raw_args = data.get("input")
    if not isinstance(raw_args, dict):
        raw_args = data.get("arguments")
    return tool, raw_args if isinstance(raw_args, dict) else {}


def _tool_call_accesses(event: Event, cwd: str = WORKDIR) -> list[Access]:
    """A tool call's accesses, its command run from `cwd` (a stateful shell's folder, `derive`) unless its own
    `workdir`/`cwd` says where."""
    tool, args = _tool_and_args(event)
    if tool not in _SEARCH_TOOLS and (len(args) == 1 or (len(args) == 2 and "description" in args)):
        # the common call, one `command` string (Claude Code's Bash adds a `description`, a text key no lookup
        # reads): of the lookups below only the command's accesses can answer (no code, path, url or query key;
        # the default search is for grep/glob only; `args` is not empty)
        command = args.get("command")
        if type(command) is str:
            return list(accesses(command, cwd=cwd)) if command else []
    out: list[Access] = []
    command = args.get("command") or args.get("cmd") or args.get("script") or (
        args.get("input") or args.get("chars") if tool in SHELL_TOOLS else None)
    if isinstance(command, list):  # an argv (Codex's `shell`): the shell text that runs it, `-c` strings quoted
        command = shlex.join(str(c) for c in command)
    for key in _WORKDIR_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            # the command runs there (Codex's `shell`/`exec_command`): read as if it began with `cd` to it, which is
            # a listing of the folder as every `cd` is, and its relative paths and bare file names resolve there
            # (/workspace, where every command runs anyway, adds nothing)
            cwd = normalise_path(value)
            if cwd != WORKDIR:
                out.append(Access("list", cwd, key))
            break
    if command:
        out.extend(accesses(str(command), cwd=cwd))
    # a file's new text: Claude Code's Write/Edit/NotebookEdit, Inspect's and Anthropic's editors (`file_text` to
    # create, `new_str`), each of MultiEdit's edits
    code = (args.get("code") or args.get("content") or args.get("new_string") or args.get("source") or args.get("file_text")
            or args.get("new_str") or args.get("new_source"))
    texts = [str(code)] if code else []
    edits = args.get("edits")
    if isinstance(edits, list):
        texts += [str(edit["new_string"]) for edit in edits if isinstance(edit, dict) and edit.get("new_string")]
    if texts:
        text = "\n".join(texts)
        # a file written as a shell script (its name or its `#!` line) is there to be run: read as shell text
        target = next((v for k in ("file_path", "path", "filename") if isinstance(v := args.get(k), str)), "")
        out.extend(accesses(text, is_shell=tool in SHELL_TOOLS and "code" not in args or is_script(target, text)))
    patch = args.get("input") or args.get("patch")
    if isinstance(patch, str) and "*** " in patch and (tool == "apply_patch" or "*** Begin Patch" in patch):
        out.extend(patch_accesses(patch))  # the programs Codex writes with a patch, read as a Write's content is
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            op = "write" if tool in ("write", "edit", "multiedit", "notebookedit") else "search" if tool == "grep" else "list" if tool in ("glob", "ls") else "read"
            out.append(Access(op, normalise_path(value), tool or key, str(args.get("pattern") or "")))
    if tool in _SEARCH_TOOLS and not any(isinstance(args.get(k), str) and args.get(k) for k in ("path", "directory")):
        out.append(Access("search" if tool == "grep" else "list", "/workspace", tool, str(args.get("pattern") or "")))
    pattern = args.get("pattern")
    if tool == "glob" and isinstance(pattern, str) and pattern.startswith(("/", "~", "..")):
        # Glob searches where its pattern's fixed leading folders are (`/data/**/*.json`: /data), not only in `path`
        path = args.get("path")
        out.append(Access("list", glob_root(pattern, normalise_path(path) if isinstance(path, str) and path else WORKDIR),
                          tool, pattern))
    for key, value in args.items():
        # any other value that is a path alone (an agent framework's `filename`, `dir_path`, `target`, a list of files)
        if key in _PATH_KEYS or key in _TEXT_KEYS:
            continue
        for item in (value if isinstance(value, list) else (value,)):
            if isinstance(item, str) and _PATH_VALUE.match(item) and not API_ROUTE.match(item):
                out.append(Access(_tool_op(tool), normalise_path(item), tool or key))
    for key in ("url", "query"):
        if tool in ("webfetch", "websearch", "web_search", "web_fetch", "fetch", "browse") and args.get(key):
            out.append(Access("network", str(args[key]), tool))
    if not out and not args and event.text and tool in SHELL_TOOLS:
        out.extend(accesses(event.text))
    return out


_OP_KIND = {"read": EventKind.file_read, "list": EventKind.file_read, "search": EventKind.file_read,
            "access": EventKind.file_read, "seen": EventKind.file_read, "write": EventKind.file_write,
            "network": EventKind.network_attempt}


def derive(events: list[Event], limits: list[str] | None = None) -> list[Event]:
    """Insert, after each action, the file/network events its text implies (sharing its seq); after each
    tool output, the places it shows were listed (op `seen`, whatever the command's spelling).

    A stateful shell (STATEFUL_SHELLS: Inspect's `bash_session`, a Codex `write_stdin` session) keeps its folder from
    one call to the next: `cd /proc/self` in one call, `cat environ` in the next reads /proc/self/environ. Its calls
    are read in order from where the last one left it (`actions.cwd_after`); every line naming such a tool is kept
    on the fast path (rules.RUNTIME_NAME_TRIGGERS), so both paths read the same calls.

    At most DERIVED_EVENT_LIMIT events are added (session_limits says why): past it the later events are kept as
    they are, without the places they imply, and `limits` is told."""
    out: list[Event] = []
    shells: dict[tuple[str, str], str] = {}  # (tool, session) -> the folder its last command left it in
    append = out.append
    tool_output, shell_command, tool_call = EventKind.tool_output, EventKind.shell_command, EventKind.tool_call
    room = session_limits.DERIVED_EVENT_LIMIT
    for index, event in enumerate(events):
        append(event)
        kind = event.kind
        if kind is tool_output:
            text = event.text
            if "/" not in text and not _LISTING_WITNESS.found_in(text):
                continue  # no path, and no listing of `/` (it would hold one of these)
            found = output_accesses(text)
        elif kind is tool_call and (stateful := _stateful_shell(event)) is not None:
            session, command = stateful
            cwd = shells.get(session, WORKDIR)
            found = _tool_call_accesses(event, cwd)
            shells[session] = cwd_after(command, cwd)
        elif kind is shell_command or kind is tool_call:
            found = event_accesses(event)
        else:
            continue
        if not found:
            continue
        if len(found) > room:
            if limits is not None:
                limits.append(past_derived(session_limits.DERIVED_EVENT_LIMIT))
            out.extend(events[index + 1:])
            return out
        room -= len(found)
        seq, source, line, time = event.seq, event.source, event.line, event.time
        for acc in found:
            op = acc.op
            append(new_event(seq, _OP_KIND[op], source, line, acc.target,
                             {"derived_from": seq, "op": op, "via": acc.via, "pattern": acc.pattern,
                              "path" if op != "network" else "url": acc.target}, time))
    return out


_LISTING_WITNESS = AnyLiteral(LISTING_WITNESSES)  # what a listing of `/` holds one of (actions.LISTING_WITNESSES)
STATEFUL_SHELLS = frozenset(("bash_session", "write_stdin"))


def _stateful_shell(event: Event) -> tuple[tuple[str, str], str] | None:
    """((tool, session), the command typed) of a call to a stateful shell, else None."""
    tool, args = _tool_and_args(event)
    if tool not in STATEFUL_SHELLS:
        return None
    command = args.get("input") or args.get("chars") or args.get("command")
    return ((tool, str(args.get("session_id", ""))), command) if isinstance(command, str) else None


def derived_access(event: Event) -> Access | None:
    """The access a derived event stands for."""
    data = event.data or {}
    if "derived_from" not in data:
        return None
    return Access(str(data.get("op")), event.text, str(data.get("via", "")), str(data.get("pattern", "")))


def all_accesses(event: Event) -> list[Access]:
    """Accesses of an event whether it is derived (one) or a parser-made file/network event."""
    acc = derived_access(event)
    if acc is not None:
        return [acc]
    if event.kind in (EventKind.file_read, EventKind.file_write, EventKind.network_attempt):
        return event_accesses(event)
    return []


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------


def session_log(events: list[Event], facts: AttemptFacts, sources: list[str],
                folder_names: frozenset[str] | None = None, limits: list[str] | None = None) -> AuditLog:
    """One session's events, within the limits (session_limits), derived: what every reader hands the rules.

    `limits`: what its readers already cut (lines past SESSION_LINE_LIMIT); to it are added the events past
    SESSION_EVENT_LIMIT (the rest dropped before derivation) and the places past DERIVED_EVENT_LIMIT."""
    limits = list(limits or [])
    for e in events:  # what a reader marked as not read: each an `audit_limit` finding
        data = e.data
        if data:
            if UNREAD_LINE in data and e.kind is EventKind.error:
                limits.append(session_limits.unrecorded_line(e.source, e.line, str(data[UNREAD_LINE])))
            if UNREAD_ITEM in data:
                limits.append(session_limits.unread_item(e.source, e.line, str(data[UNREAD_ITEM])))
    most = session_limits.SESSION_EVENT_LIMIT
    if len(events) > most:
        limits.append(past_events(len(events), most))
        events = events[:most]
    return AuditLog(derive(events, limits), facts, sources, folder_names, limits)


def load_session_file(path: Path, facts: AttemptFacts | None = None, fmt: str | None = None) -> AuditLog:
    """A lone session file in any known format."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such session file or attempt folder")
    if fmt is not None and fmt not in FORMATS:
        raise UserError(f"unknown session format {fmt!r} (known: {', '.join(FORMATS)})")
    limits: list[str] = []
    events = read_session_file(path, fmt, limits=limits)
    return session_log(events, facts or AttemptFacts(attempt_id=path.stem), [path.name], limits=limits)


def load_attempt(attempt_dir: Path, prefilter: "Prefilter | None" = None) -> AuditLog:
    """An attempt folder: events.jsonl (or the CLI raw log) plus the independent witnesses."""
    attempt_dir = Path(attempt_dir)
    folder = _Listing(attempt_dir)
    facts_bytes = folder.file_bytes(ATTEMPT_FILE)
    facts = AttemptFacts.from_attempt_json(attempt_dir / ATTEMPT_FILE, facts_bytes) if facts_bytes is not None \
        else AttemptFacts(attempt_id=attempt_dir.name)
    events: list[Event] = []
    sources: list[str] = []
    limits: list[str] = []
    primary = attempt_dir / EVENTS_FILE
    secret_re = prefilter.secret_pattern(facts) if prefilter else None
    data = folder.nonempty_bytes(EVENTS_FILE)
    if data is not None:
        # cut before the prefilter too: its set of candidate lines would hold every line of a flood
        data, cut = cut_to_lines(data, EVENTS_FILE, limits)
        kept = prefilter.keep_lines(data, secret_re, extra=True) if prefilter else None
        events.extend(_read_events_jsonl(primary, None, data, kept, cut))
        sources.append(primary.name)
    else:
        for name in RAW_CLI_LOGS:
            raw = folder.file_bytes(name)
            if raw is not None:
                events.extend(read_session_file(attempt_dir / name, first_seq=_next_seq(events), data=raw, limits=limits))
                sources.append(name)
    for name in WITNESS_LOGS:
        data = folder.nonempty_bytes(name)
        if data is None:
            continue
        path = attempt_dir / name
        keep = None
        lines: set[int] | None = None
        gateway = name.startswith("gateway")
        reply_only: dict[int, dict[str, Any]] | None = {} if gateway and prefilter is not None else None
        spans = None
        if gateway:
            data, spans, total = spans_within(data, session_limits.SESSION_LINE_LIMIT)
            if total is not None:
                limits.append(past_lines(name, total, session_limits.SESSION_LINE_LIMIT))
        if prefilter is not None:
            lines = prefilter.witness_lines(data, secret_re, spans, reply_only)
            if lines is None:
                continue
            keep = lines.__contains__
        if gateway:
            spans = spans or line_spans(data)
            oob = _out_of_band(data, spans)
            if not oob:
                events.extend(read_session_file(path, first_seq=_next_seq(events), keep=keep, data=data, spans=spans,
                                                reply_only=reply_only))
            else:
                events.extend(_read_apart(path, data, spans, keep, reply_only, oob, _next_seq(events)))
        else:
            events.extend(read_session_file(path, first_seq=_next_seq(events), keep=keep, data=data, limits=limits))
        sources.append(name)
    text = folder.response_text()
    if text and not any(e.kind is EventKind.final_answer and e.text.strip() == text for e in events):
        events.append(Event.model_construct(seq=_next_seq(events), kind=EventKind.final_answer, time=None,
                                            source=RESPONSE_FILE, line=1, text=text, data={}))
        sources.append(RESPONSE_FILE)
    events.sort(key=lambda e: (0 if e.source == EVENTS_FILE or e.source not in _WITNESSES else 1, e.seq))
    return session_log(events, facts, sources, folder.names(), limits)


_WITNESSES = frozenset(WITNESS_LOGS + (RESPONSE_FILE,))  # their events sort after the agent's own log's


def _read_apart(path: Path, data: bytes, spans: list[tuple[int, int]], keep: Callable[[int], bool] | None,
                reply_only: dict[int, dict[str, Any]] | None, oob: set[int], first_seq: int) -> list[Event]:
    """A gateway log with out-of-band lines (`out_of_band_lines`): the agent's client's lines and the others are
    read by two normalisers, then put back in line order and numbered from `first_seq`.

    Why apart: a normaliser emits a prompt the first time it sees it. Read together, an out-of-band request that
    re-sends a message the agent's client had sent (the task prompt itself, re-asked by a script through the
    gateway socket) made no event, so nothing marked it and the out-of-band finding never fired; and whether it
    made one depended on which of the client's lines were read (the fast path reads fewer). Read apart, every
    out-of-band line is read whole by a normaliser that saw only such lines, on both paths."""
    own = (lambda n: n not in oob) if keep is None else (lambda n: n not in oob and keep(n))
    if reply_only:
        reply_only = {n: reply for n, reply in reply_only.items() if n not in oob}
    read = read_session_file(path, keep=own, data=data, spans=spans, reply_only=reply_only)
    for event in read_session_file(path, keep=oob.__contains__, data=data, spans=spans):
        event.data = dict(event.data or {}, out_of_band=True)  # the agent wrote that request itself: all of it is evidence
        read.append(event)
    read.sort(key=lambda e: e.line or 0)  # stable: each line's events keep their order
    for seq, event in enumerate(read, start=first_seq):
        event.seq = seq
    return read


# The attempt folder's files the auditor reads: a listed name that equals one of them but for case (or that is
# not ASCII, which a case- or normalisation-insensitive file system may equate with one) makes the listing
# answer nothing, and each question goes to the file system as before.
_READ_NAMES = frozenset((ATTEMPT_FILE, EVENTS_FILE, RESPONSE_FILE) + RAW_CLI_LOGS + WITNESS_LOGS)


class _Listing:
    """One `os.scandir` of an attempt folder answering what `Path.exists()` and `stat().st_size` asked per file,
    and the door every one of its files the auditor reads comes through (`file_bytes`: `attempt_folder.read_attempt_file`).

    Why one listing: ten stat calls and path joins per attempt cost as much as reading its events.jsonl. A name
    listed as a regular file exists; a name not listed does not. Anything else listed under a name the auditor
    reads (a link, a folder, a FIFO, a device) is refused, one line naming it (`refused`): statebox never writes
    one there, and a run folder someone hands over may hold one (tar keeps links and FIFOs). A folder that cannot
    be listed, or a name the file system may equate with another, sends each question to the file system, which
    answers by `lstat` under the same rules."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files: set[str] = set()  # regular files (not links)
        self.others: set[str] = set()  # everything else listed
        self.authoritative = False
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    (self.files if entry.is_file(follow_symlinks=False) else self.others).add(entry.name)
        except OSError:
            return  # not a folder, or not listable: every question goes to the file system
        names = self.files | self.others
        self.authoritative = all(n.isascii() for n in names) and not any(
            n not in _READ_NAMES and n.lower() in _READ_NAMES for n in names)

    def names(self) -> frozenset[str] | None:
        """Every name listed (all ASCII, none a case variant of a name the auditor reads), or None where the
        listing does not answer for the file system."""
        return frozenset(self.files | self.others) if self.authoritative else None

    def exists(self, name: str) -> bool:
        """Whether the folder holds `name` as a regular file; anything else under that name is refused."""
        if self.authoritative:
            if name in self.files:
                return True
            if name not in self.others:
                return False
        return attempt_file_exists(os.path.join(self.folder, name))

    def file_bytes(self, name: str) -> bytes | None:
        """The file's bytes (through the door), or None where the folder does not hold it."""
        return read_attempt_file(os.path.join(self.folder, name)) if self.exists(name) else None

    def nonempty_bytes(self, name: str) -> bytes | None:
        """The file's bytes, or None where it is missing or empty."""
        return self.file_bytes(name) or None

    def response_text(self) -> str:
        """response.txt as `read_text(encoding="utf-8", errors="replace").strip()`, "" where it is missing."""
        data = self.file_bytes(RESPONSE_FILE)
        if not data:
            return ""
        if b"\r" in data:  # read_text turns \r\n and \r into \n: so does its io machinery here
            return as_read_text(data).strip()
        return data.decode("utf-8", "replace").strip()


_USER_AGENT = re.compile(rb'"user-agent":\s*"((?:[^"\\]|\\.)*)"', re.I)


def out_of_band_lines(path: Path) -> set[int]:
    """Lines of a gateway log whose request came from another client than the agent's own.

    The agent's client (the `claude`/`codex` CLI, the react agent's SDK) sends every request of its
    conversation with one user-agent; a request with another one (or none) was made by something the
    agent ran, e.g. a script in the sandbox asking the model for the answer through the gateway socket.
    The dominant user-agent is the client's (ties: the first request's). A client that spoofs its
    user-agent is not caught here; the tool call that made the request still is (rules.rule_network).
    Only served requests vote: refused ones carry no headers, and an honest client that ran out of
    budget must not outvote its own served requests with its refusals.
    """
    data = Path(path).read_bytes()
    return _out_of_band(data, line_spans(data))


def _out_of_band(data: bytes, spans: list[tuple[int, int]]) -> set[int]:
    """`out_of_band_lines` over a log already read (only each line's head is looked at)."""
    agents: list[tuple[int, bytes]] = []
    find = data.find
    search = _USER_AGENT.search
    for n, (start, end) in enumerate(spans, start=1):
        request = find(b'"request":', start, end)
        if request < 0:
            continue  # a refusal logs no request (nor, mostly, headers): it neither votes nor is out of band
        # headers come before the request body: the user-agent is looked for in the line's first 8 KiB (newline
        # included) up to the first `"request":`, searched in place (the pattern has no anchor or lookbehind a
        # start position could change, so this is searching that slice)
        head_end = min(end + 1, start + 8192)
        m = search(data, start, request if request + 10 <= head_end else head_end)
        agents.append((n, m.group(1) if m else b""))
    if len(agents) < 2:
        return set()
    counts: dict[bytes, int] = {}
    for _, ua in agents:
        counts[ua] = counts.get(ua, 0) + 1
    first = agents[0][1]
    client = max(counts, key=lambda ua: (counts[ua], ua == first))
    own = {client}
    if _SDK_CLIENT.match(client):
        # a host-side agent (react, mllm, video agent) may hold both SDKs; its container never sees the socket
        own |= {ua for ua in counts if _SDK_CLIENT.match(ua)}
    return {n for n, ua in agents if ua not in own}


_SDK_CLIENT = re.compile(rb"^(?:Async)?(?:Anthropic|OpenAI)/Python ")


def _next_seq(events: list[Event]) -> int:
    return max((e.seq for e in events), default=-1) + 1


class Prefilter:
    """Cheap candidate-line detection: one combined pattern for the static rules, one small one per attempt."""

    def __init__(self, patterns: list[str], always: list[str] | None = None, output: list[str] | None = None) -> None:
        self.static = compile_any(patterns)
        # the triggers of what a tool's output can show (rules.OUTPUT_TRIGGERS), searched in the new bytes of gateway
        # lines: a tool result the gateway log alone holds is in a request half, which the static triggers never read
        self.output = compile_any(output) if output else None
        self.always = compile_any(always or []) if always else None
        # both in one pattern, for events.jsonl: one pass, not two, while no match it finds reaches across a
        # newline (then it finds every line each pattern's own scan finds: `lines_matching_within`)
        self.static_or_always = compile_any(patterns + always) if always else None
        # both the static and the output triggers, for a CLI's own session file, which holds the tool outputs no
        # gateway log witnesses (`session_file_prefilter`); compiled on first need
        self._patterns, self._output_patterns = patterns, output or []
        self._with_output: dict[tuple[str, ...], Any] = {}

    def static_and_output(self, extra: tuple[str, ...] = ()) -> Any:
        """The static and output triggers and `extra` as one pattern (`lines_matching_within` says when one pass
        suffices), compiled once per `extra`."""
        pattern = self._with_output.get(extra)
        if pattern is None:
            pattern = self._with_output[extra] = compile_any(self._patterns + self._output_patterns + list(extra))
        return pattern

    def secret_pattern(self, facts: AttemptFacts) -> Literals | None:
        """The session's secret values as its logs' bytes may hold them: as written, and as a JSON string spells them
        (a value holding `"`, `\\` or a tab is escaped in the line; non-ASCII, where a writer escapes it)."""
        literals = secret_literals(facts)
        spelled = [json.dumps(value, ensure_ascii=ascii)[1:-1] for value in literals if not _spelled_as_is(value)
                   for ascii in (False, True)]
        return Literals(list(dict.fromkeys(literals + spelled))) if literals else None

    def _lines(self, data: bytes, matchers: list[Any]) -> set[int]:
        lines: set[int] = set()
        for m in matchers:
            if isinstance(m, Literals):
                lines |= m.lines(data)
            elif m is not None:
                lines |= matching_lines(m, data)
        return lines

    def keep_lines(self, data: bytes, secret_re: Literals | None, extra: bool = False) -> set[int]:
        """Candidate lines of an events.jsonl already read (`extra`: also the always-parsed kinds)."""
        lines = lines_matching_within(self.static_or_always, data) \
            if extra and self.static_or_always is not None else None
        if lines is None:
            lines = matching_lines(self.static, data)
            if extra and self.always is not None:
                lines |= matching_lines(self.always, data)
        if secret_re is not None:
            lines |= secret_re.lines(data)
        if extra:
            lines |= first_action_lines(data)
        return lines

    def witness_lines(self, data: bytes, secret_re: Literals | None, gateway_spans: list[tuple[int, int]] | None,
                      reply_only: dict[int, dict[str, Any]] | None = None) -> set[int] | None:
        """Candidate lines of a witness log (a gateway log when its line spans are given), or None
        when nothing in it can matter.

        Gateway lines repeat the whole conversation (prompt included) in their request;
        what is new in a line is its response and the last tool results. So the static rules look at the
        response half; the secrets, the evidence triggers and the output triggers (what a tool's output can show,
        rules.OUTPUT_TRIGGERS: a tool result the gateway log alone holds) at what is new in the line; and the
        first line (the prompt) is always read. The long request halves are never copied: only replies are sliced.
        The evidence triggers and the secrets read only what each line does not repeat from the line
        before (fastmatch.Windowed and Literals.lines_in say why that is the same answer).

        `reply_only`, when given, is filled with the lines kept for their reply alone (no secret, no
        evidence, not the first line) -> that reply half (`gateway_log.top_level_reply`, which also says where
        each line's reply starts: not at its last `"response"`, which the model can nest in a tool input).
        Of those only the reply is parsed
        (`gateway_log.parse_kept_lines`): the request half is the conversation the agent's client sent, and
        what it adds (tool results) is what events.jsonl already holds. Parsing it whole cost a sixth of
        the audit (the tool results between two kept lines) for tool outputs only a trigger in the *next*
        reply happened to bring in. A line whose new bytes hold a secret or evidence is still read whole,
        and so are the tool results it re-sends that no line read before.
        """
        if gateway_spans is None:
            lines = self._lines(data, [self.static, secret_re])
            return lines if lines else None
        runs = line_runs_of(data, gateway_spans)  # what each line repeats, found once for both scans
        evidence = _gateway_evidence()
        # the bytes both scans read, joined once: the evidence windows, widened by the longest secret value
        read = NewBytes(data, gateway_spans, runs, secret_re.margin if secret_re is not None else 0, separated=True) \
            if evidence.windowed else None
        keep = evidence.lines_in(data, gateway_spans, runs, read)
        if secret_re is not None:
            keep |= secret_re.lines_in(data, gateway_spans, runs, read)
        replies: list[tuple[int, int]] = []  # (start, end) of the reply half of every line but the first
        halves: list[dict[str, Any] | None] = []  # each one read (None: the whole line is searched as its reply)
        owners: list[int] = []
        view = memoryview(data)
        first = True
        acted = False  # whether a line read so far holds the agent's first action (`AuditLog.given_prompts`)
        for n, (start, end) in enumerate(gateway_spans, start=1):
            if end == start or (data[start:start + 1].isspace() and not data[start:end].strip()):
                continue  # a blank line
            cut, reply = gateway_log.top_level_reply(data, view, start, end)
            if first:  # read whole: the prompt (and its reply's action, when it acts)
                keep.add(n)
                first = False
                acted = reply is not None and gateway_log.reply_acts(reply)
                continue
            replies.append((cut, end))
            halves.append(reply)
            owners.append(n)
            if reply is None:
                # not read here: a reply that bills server tools under any counter name is evidence, and a line
                # before the first action is known is read (whole) for the action it may hold
                if not acted or data.find(b'"server_tool_use"', start, end) >= 0:
                    keep.add(n)
                continue
            if gateway_log.reply_billed_server_tools(reply):
                keep.add(n)  # evidence: read whole, as a line whose new bytes hold an evidence trigger
            elif not acted:
                # the first line whose reply acts is read (its reply at least) wherever no trigger is in it: the
                # prompts a log holds before its first action are the ones that excuse an echo, and an unread first
                # action let a prompt after it (a reminder holding what the agent wrote) pass for one given before
                acted = gateway_log.reply_acts(reply)
                if acted and n not in keep:
                    keep.add(n)
                    if reply_only is not None:
                        reply_only[n] = reply
        if self.output is not None:
            keep |= _requests_matching(self.output, data, gateway_spans, read, dict(zip(owners, (cut for cut, _ in replies))))
        # the replies are searched with events.jsonl's pattern (the static triggers and the always-parsed kinds):
        # it finds a match wherever the static triggers alone do, so it keeps every reply they keep (a reply naming
        # an always-parsed kind is read too: more read, never less), and a fresh process builds one automaton's
        # states for both logs instead of two (~10 ms of a 0.3 s audit)
        for i in _replies_matching(self.static_or_always or self.static, data, replies):
            n = owners[i]
            reply = halves[i]
            if reply_only is not None and n not in keep and reply is not None:
                reply_only[n] = reply
            keep.add(n)
        return keep


def _requests_matching(pattern: Any, data: bytes, spans: list[tuple[int, int]], read: NewBytes | None,
                       cuts: dict[int, int]) -> set[int]:
    """Lines of a gateway log (but the first and blank ones: not in `cuts`, line -> where its reply starts) where
    `pattern` matches in the new bytes of the line's request (`read`'s windows, each widened out to a separator,
    cut to the line's `"request":` key and its reply's start), or in the whole line when there are no windows.

    Why cut to the request: the gateway's own header fields before it (`"path": "/v1/messages"`) are new in every
    line (the time before them is), and an output trigger matches the path; the reply is read by the static
    triggers already."""
    if read is None:
        return {n for n in matching_lines(pattern, data) if n in cuts}
    view = memoryview(data)
    pieces: list[memoryview] = []
    owners: list[int] = []
    request_of: dict[int, int] = {}
    for (lo, hi), n in zip(read.windows, read.owners):
        cut = cuts.get(n)
        if cut is None:
            continue
        request = request_of.get(n)
        if request is None:
            start = spans[n - 1][0]
            found = data.find(b'"request":', start, cut)
            request = request_of[n] = found if found >= 0 else start
        lo, hi = max(lo, request), min(hi, cut)
        if hi > lo:
            pieces.append(view[lo:hi])
            owners.append(n)
    return {owners[i - 1] for i in matching_lines(pattern, b"\n".join(pieces))} if pieces else set()


_ACTION_KIND = re.compile(rb'"kind" *: *"(?:' + b"|".join(sorted(k.value.encode() for k in ACTION_KINDS)) + rb')"')


def first_action_lines(data: bytes) -> set[int]:
    """The lines of an events.jsonl that name an action kind, up to the first that is one of the agent's own actions
    (an event of an ACTION_KINDS kind not derived from another): read on the fast path whether a trigger is in them
    or not.

    Why: `AuditLog.given_prompts` are the prompts before the log's first action, the only ones that may excuse an
    echo. A first action no trigger matches (`ls -la`) was never read, so a user message after it (a reminder the
    agent wrote, holding the video's original name) passed for a prompt given before it and excused the agent
    naming the video. Each line naming an action kind is parsed until one is that action (a kind named in a
    line's data, or a line that does not parse, is read on and the next one tried)."""
    lines: set[int] = set()
    for match in _ACTION_KIND.finditer(data):
        start = data.rfind(b"\n", 0, match.start()) + 1
        end = data.find(b"\n", match.end())
        lines.add(data.count(b"\n", 0, start) + 1)
        try:
            obj = orjson.loads(data[start:end if end >= 0 else len(data)])
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict) and obj.get("kind") in _ACTION_KIND_NAMES:
            inner = obj.get("data")
            if not (isinstance(inner, dict) and "derived_from" in inner):
                break
    return lines


_ACTION_KIND_NAMES = frozenset(k.value for k in ACTION_KINDS)


# Pattern syntax that tells a text's own edges from a newline (`\A`, `\z`, multi-line turned off or `.` made to match
# one): with it, a reply's match may not stand where the replies are joined by newlines, and every reply is searched
# alone. A flag group that only turns case folding off (`(?-i:...)`, the static triggers' case-sensitive parts) does not.
_EDGE_SENSITIVE = re.compile(rb"\\[AzZ]|\(\?[a-zA-Z]*s|\(\?[a-zA-Z]*-[a-zA-Z]*m")


@lru_cache(maxsize=16)
def _edge_sensitive(source: bytes) -> bool:
    """Whether a pattern's source holds `_EDGE_SENSITIVE` syntax (asked once per compiled pattern)."""
    return _EDGE_SENSITIVE.search(source) is not None


def _replies_matching(static: Any, data: bytes, replies: list[tuple[int, int]]) -> list[int]:
    """Indexes of the `replies` (spans of `data`, none holding a newline) in which `static` finds something or that
    name a provider-run item (`gateway_log.has_provider_item`): `static.search(reply)` for each, searched as one text.

    Exact: the replies are joined by newlines and searched from the start of each reply not yet decided. The
    combined pattern is multi-line (`(?im)`, fastmatch.combined), so `^`, `$` and word edges see a newline as they
    see a text's edge: a match inside one reply alone is a match there when joined, and a match lying inside one
    reply when joined is one of it alone; the leftmost match from a reply's start is then in the first reply
    from there that has one, unless it reaches across a newline: that reply is then searched alone. The provider
    item pattern holds no newline and no anchor: its matches are the same joined or not."""
    if not replies:
        return []
    view = memoryview(data)
    joined = b"\n".join([view[lo:hi] for lo, hi in replies])
    starts: list[int] = []
    at = 0
    for lo, hi in replies:
        starts.append(at)
        at += hi - lo + 1
    found: set[int] = set()
    if _edge_sensitive(static.pattern):
        found.update(i for i, (lo, hi) in enumerate(replies) if static.search(data[lo:hi]) is not None)
    else:
        search = match_bounds(static)
        pos = 0
        size = len(joined)
        while pos <= size:
            start, end = search(joined, pos, size)
            if start < 0:
                break
            i = bisect_right(starts, start) - 1
            reply_end = starts[i] + replies[i][1] - replies[i][0]
            if end <= reply_end or static.search(joined[starts[i]:reply_end]) is not None:
                found.add(i)
            pos = reply_end + 1
    found.update(bisect_right(starts, at) - 1 for at in gateway_log.provider_items_at(joined))
    return sorted(found)


_EVIDENCE: Windowed | None = None


def _gateway_evidence() -> Windowed:
    """Refusals, provider-run tools and provider-held state anywhere in a gateway line (compiled once)."""
    global _EVIDENCE
    if _EVIDENCE is None:
        _EVIDENCE = Windowed(gateway_log.EVIDENCE_TRIGGERS)
    return _EVIDENCE


def _spelled_as_is(value: str) -> bool:
    """Whether a JSON string spells `value` as it is (printable ASCII but `"` and `\\`: most secret values)."""
    return value.isascii() and value.isprintable() and '"' not in value and "\\" not in value


def secret_literals(facts: AttemptFacts) -> list[str]:
    """The strings whose mere presence matters (rule 7 and honeytokens), guarded against trivial values."""
    out = []
    for value in [facts.original_name, facts.original_stem, facts.item_id, *facts.honeytoken_values, *facts.honeytoken_paths]:
        if value and usable_secret(value):
            out.append(value)
    return out
