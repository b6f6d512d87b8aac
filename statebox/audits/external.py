"""Other harnesses' runs for the auditor: find the format, read each session, judge it with the same rules.

Most people who need to know whether an agent cheated did not run it in statebox. `statebox audit
PATH` also takes (issue 26):
- `inspect`: an Inspect AI log (`.eval` or `.json`), read with inspect_ai's own reader; one session per
  sample and epoch (`sessions/inspect_sample.py`);
- `harbor`: a Harbor job or trial folder, or one ATIF `trajectory.json` (`sessions/atif_trajectory.py`);
- `claude`: Claude Code's own session files (`~/.claude/projects/<project>/<session>.jsonl`,
  `sessions/claude_session.py`; a stream-json log is read as before);
- `codex`: Codex's session rollouts (`~/.codex/sessions/**/rollout-*.jsonl`, `sessions/codex_rollout.py`;
  an `exec --json` log is read as before);
- a folder holding any of these (statebox run folders inside it are audited read-only).
Each format becomes statebox `Event`s through `statebox/sessions/`, then the derived accesses
(`events.derive`) and the rules in `rules.py`, unchanged: the verdict of a session does not depend on
which harness logged it, only on what the agent did.

Per-session facts the rules need (the question, the original video name, the item id) come from the
log where it has them (an Inspect sample's metadata and input, an ATIF trajectory's `extra`), and from
`--items FILE` (JSONL, one object per session: `session` | `sample` | `id`, and `question`,
`original_name`, `item_id`, optionally `honeytoken_values` / `honeytoken_paths`), which wins where it
names a field: the auditor's own facts over the log's.

statebox's own exports (`statebox export`) lack what only the run folder holds: the decoys' paths and
canaries (secret facts), the original video name, the host's atime snapshot of the decoys, and the
witness logs (an export is the attempt's events.jsonl as a conversation: an action the gateway alone
saw, which an agent can leave out of its own log, is not in it; nor is an output past the export's cap).
Their audit re-judges every action in the export, and takes from the verdict the export recorded each
finding it does not make again (matched, one for one, to a re-judged finding of its category and
severity), marked `recorded by the run`. Carried findings can only raise a verdict, never lower one,
and a log that is not a statebox export has none to carry.

Every file is hostile: opened without following links, regular files only, under a size cap; an Inspect log
is also admitted before inspect_ai reads it (`inspect_admission`: zip bombs, entry counts, references).
"""

from __future__ import annotations

import errno
import io
import json
import multiprocessing
import os
import re
import stat
import sys
import zipfile
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, timedelta
from itertools import chain, islice, repeat
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterable, Iterator, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from statebox.attempt_folder import ATTEMPTS_DIR, ATTEMPT_FILE, EVENTS_FILE, RUN_CONFIG_FILE
from statebox.audits import inspect_admission, session_limits
from statebox.audits import session_file_prefilter
from statebox.audits.events import AttemptFacts, AuditLog, FactNotText, Prefilter, new_event, session_log, sniff_object
from statebox.audits.fastmatch import Literals
from statebox.audits.rules import run_rules
from statebox.audits.session_limits import cut_to_lines, past_bytes, past_steps
from statebox.audits.verdict import AuditedAttempt, audit_run, default_prefilter, verdict_from
from statebox.audits.workers import workers
from statebox.collector import collector_paused
from statebox.errors import DataError, UserError, file_kind
from statebox.json_text import decoded_lines, json_value, jsonl_lines, line_loads
from statebox.schema import Event, EventKind, Finding, FindingCategory, Severity
from statebox.sessions import EventDraft, claude_stream, codex_jsonl
from statebox.sessions import atif_trajectory, claude_session, codex_rollout, inspect_sample
from statebox.sessions.shapes import list_of, object_at
from statebox.userfiles import read_upto

if TYPE_CHECKING:  # inspect_ai is heavy: imported where an Inspect log is read (see _inspect_reader)
    from inspect_ai.log import EvalLog, EvalSample

T = TypeVar("T")

EXTERNAL_FORMATS = ("inspect", "harbor", "claude", "codex", "statebox")
MAX_LOG_BYTES = 2 * 1024**3  # one log file; an Inspect log of a large eval is big, a session file far smaller
MAX_ITEMS_BYTES = 64 * 1024**2
MAX_FILES = 200_000  # files looked at in one folder walk
HEAD_BYTES = 64 * 1024  # what is read of a file to tell its format
HARBOR_TRAJECTORY = "trajectory.json"  # a Harbor trial's session file
CARRIED_PREFIX = "recorded by the run"
_ATIF_HEAD = re.compile(rb'"schema_version"\s*:\s*"ATIF')
_INSPECT_HEAD = re.compile(rb'"eval"\s*:\s*\{')
_ROLLOUT_HEAD = re.compile(rb'^\{[^\n]{0,200}"type"\s*:\s*"(?:session_meta|response_item|event_msg|turn_context)"')
_CLAUDE_HEAD = re.compile(rb'"(?:sessionId|parentUuid)"\s*:')


# ---------------------------------------------------------------------------
# hostile files
# ---------------------------------------------------------------------------


def open_regular(path: Path, cap: int = MAX_LOG_BYTES) -> BinaryIO:
    """Open a user's file for reading: no link followed (O_NOFOLLOW), a regular file (a fifo or device
    would hang or never end), at most `cap` bytes; otherwise one line naming the file and why."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as exc:
        why = "a symbolic link (not followed)" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
        raise UserError(f"{path}: cannot read ({why})") from None
    info = os.fstat(fd)  # before fdopen, which refuses a folder with its own error (a traceback, `--items .`)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UserError(f"{path}: {file_kind(info.st_mode)}, not a regular file")
    if info.st_size > cap:
        os.close(fd)
        raise UserError(f"{path}: {info.st_size} bytes, over the {cap} byte cap for one log")
    return os.fdopen(fd, "rb")


def read_capped(path: Path, cap: int = MAX_LOG_BYTES) -> bytes:
    with open_regular(path, cap) as fh:
        data = read_upto(fh, cap + 1)  # not fh.read(cap + 1), which allocates the 2 GiB cap before reading
    if len(data) > cap:  # grew while being read
        raise UserError(f"{path}: over the {cap} byte cap for one log")
    return data


def _head(path: Path) -> bytes:
    try:
        with open_regular(path, cap=sys.maxsize) as fh:  # its size is judged where it is read (a file over the cap
            # was taken for none of ours here, and left out of a folder's audit without a word)
            return fh.read(HEAD_BYTES)
    except UserError:
        return b""


# ---------------------------------------------------------------------------
# --items FILE
# ---------------------------------------------------------------------------


class SessionFacts(BaseModel):
    """One line of `--items`: which session, and what the auditor knows about its item."""

    model_config = ConfigDict(extra="forbid")

    session: str | None = None
    sample: str | None = None
    id: str | None = None
    question: str = ""
    original_name: str = ""
    item_id: str = ""
    honeytoken_values: list[str] = []
    honeytoken_paths: list[str] = []

    @model_validator(mode="after")
    def _one_key(self) -> "SessionFacts":
        keys = [k for k in (self.session, self.sample, self.id) if k]
        if len(keys) != 1:
            raise ValueError("give exactly one of session, sample or id")
        return self

    @property
    def key(self) -> str:
        return str(self.session or self.sample or self.id)


def read_items(path: Path) -> dict[str, SessionFacts]:
    """`--items FILE`, read as a hostile file (regular, capped); every error names file:line."""
    data = read_capped(Path(path), MAX_ITEMS_BYTES)
    out: dict[str, SessionFacts] = {}
    for n, raw in enumerate(jsonl_lines(data.decode("utf-8", "replace")), start=1):
        if not raw.strip():
            continue
        try:
            facts = SessionFacts.model_validate_json(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "line"
            raise DataError(path, n, f"{where}: {first.get('msg', 'invalid')}") from None
        if facts.key in out:
            raise DataError(path, n, f"session {facts.key!r} given twice")
        out[facts.key] = facts
    return out


def merge_facts(base: AttemptFacts, given: SessionFacts | None) -> AttemptFacts:
    """The log's facts, with every field `--items` names taking its place."""
    if given is None:
        return base
    name = given.original_name or base.original_name
    return AttemptFacts(
        attempt_id=base.attempt_id, agent=base.agent, item_id=given.item_id or base.item_id, original_name=name,
        original_stem=Path(name).stem if given.original_name else base.original_stem, dataset=base.dataset,
        workspace_video=base.workspace_video, question=given.question or base.question,
        honeytoken_values=list(given.honeytoken_values or base.honeytoken_values),
        honeytoken_paths=list(given.honeytoken_paths or base.honeytoken_paths),
    )


# ---------------------------------------------------------------------------
# detection
# ---------------------------------------------------------------------------


def is_statebox_folder(path: Path) -> bool:
    """A statebox run folder or attempt folder (what `statebox audit` has always read)."""
    if (path / "results.sqlite").is_file() or (path / RUN_CONFIG_FILE).is_file() and (path / ATTEMPTS_DIR).is_dir():
        return True
    if (path / ATTEMPT_FILE).is_file() or (path / EVENTS_FILE).is_file():
        return True
    # RUN_DIR/attempts, or any folder of attempt folders: what `audit_run` has always taken
    return any(child.is_dir() and not child.is_symlink() and ((child / ATTEMPT_FILE).is_file() or (child / EVENTS_FILE).is_file())
               for child in _children(path))


def _children(path: Path) -> Iterator[Path]:
    try:
        yield from (path / ATTEMPTS_DIR if (path / ATTEMPTS_DIR).is_dir() else path).iterdir()
    except OSError:
        return


def file_format(path: Path) -> str | None:
    """The format of one file by its name and first bytes, or None when it is none of ours."""
    name = path.name
    if name.endswith(".eval"):
        return "inspect" if _head(path)[:2] == b"PK" else None
    head = _head(path)
    if name.endswith(".json"):
        if _ATIF_HEAD.search(head):
            return "harbor"
        if _INSPECT_HEAD.search(head) and b'"version"' in head:
            return "inspect"
        return _document_format(path, head)
    if name.endswith(".jsonl"):
        first = _first_object(head)
        if first is None and b"\n" not in head.strip() and len(head) == HEAD_BYTES:
            # a first line longer than the head (a rollout's instructions, a CLI's request copy): its keys
            return "codex" if _ROLLOUT_HEAD.search(head) else "claude" if _CLAUDE_HEAD.search(head) else None
        if first is None:
            return None
        if claude_session.looks_like_session(first) or (sniff_object(first) == "claude" and "sessionId" in first):
            return "claude"
        if codex_rollout.looks_like_rollout(first):
            return "codex"
        return None
    return None


def _document_format(path: Path, head: bytes) -> str | None:
    """The format of a JSON document whose head names none: read whole and judged by its shape.

    Why: the head's patterns are a fast yes, not a no. An ATIF `schema_version` after 64 KiB of `extra`, an
    Inspect log whose `samples` come before its `eval`, or a key spelled with an escape (`"\\u0041TIF-v1.4"`)
    is still that format to its reader, and was taken for none of ours: in a Harbor job the trial's row went
    missing without a word, and a lone Inspect log was read as a plain session file and judged clean. Only a
    head that is the whole file and holds no escape is a final no; a document over DOCUMENT_BYTES_LIMIT is not
    read to be sniffed (a `trajectory.json` so passed over is named by `discover` as not read)."""
    if len(head) < HEAD_BYTES and b"\\u" not in head:
        return None
    try:
        raw, unread = read_within(path, session_limits.DOCUMENT_BYTES_LIMIT)
        obj = json_value(raw) if unread is None else None
    except (UserError, ValueError):  # gone or replaced since its head was read, or no JSON
        return None
    if atif_trajectory.looks_like_atif(obj):
        return "harbor"
    if isinstance(obj, dict) and isinstance(obj.get("eval"), dict) and "version" in obj:
        return "inspect"
    return None


def _first_object(head: bytes) -> dict[str, Any] | None:
    """The first non-blank line of `head` (a file's head, or a whole file however long its first line), parsed,
    when it is an object; lines cut one at a time: a head holds hundreds of them, and this runs for every file."""
    start = 0
    while start <= len(head):
        end = head.find(b"\n", start)
        end = len(head) if end < 0 else end
        raw = head[start:end]
        if raw.strip():
            try:
                obj = json_value(raw)
            except ValueError:
                return None
            return obj if isinstance(obj, dict) else None
        start = end + 1
    return None


def detect(path: Path) -> str:
    """The format of PATH: one of EXTERNAL_FORMATS, `folder` (a folder of several), or `session-file`
    (a lone file in one of the formats `statebox audit` always read: events, stream-json, exec JSONL,
    gateway, text)."""
    path = Path(path)
    if path.is_dir():
        if is_statebox_folder(path):
            return "statebox"
        if (path / "agent" / HARBOR_TRAJECTORY).is_file() or (path / HARBOR_TRAJECTORY).is_file():
            return "harbor"
        return "folder"
    return file_format(path) or "session-file"


@dataclass
class Found:
    fmt: str
    path: Path
    # Codex only: the rollouts of the subagents this session started, (path, thread id), read with it (`rollout_families`)
    children: tuple[tuple[Path, str], ...] = ()


def discover(root: Path, only: str | None = None, passed_over: list[str] | None = None) -> list[Found]:
    """Every log under ROOT (links never followed, at most MAX_FILES files looked at), with its format;
    `only` keeps one format. A statebox run or attempt folder is one entry, its insides not walked.

    `passed_over` is told of what could have held a session and was not read: a link named like a log (`.eval`,
    `.json`, `.jsonl`) and a folder that could not be listed. Without it the audit's rows were all the user saw,
    and a session behind a link or in an unreadable folder was missing from them without a word."""
    root = Path(root)
    if root.is_file():
        fmt = file_format(root)
        return [Found(fmt, root)] if fmt and (only in (None, fmt)) else []
    found: list[Found] = []
    seen = 0

    def unlisted(error: OSError) -> None:
        if passed_over is not None:
            passed_over.append(f"{error.filename}: a folder that could not be listed ({error.strerror or error})")
    for folder, dirs, files in walk_down(root, onerror=unlisted):
        here = Path(folder)
        if is_statebox_folder(here) and not (here / "agent" / HARBOR_TRAJECTORY).is_file():
            if only in (None, "statebox"):
                found.append(Found("statebox", here))
            dirs[:] = []
            continue
        dirs.sort()
        if _read_with_its_session(here):
            seen += len(files)  # looked at all the same: the cap holds
            if seen > MAX_FILES:
                raise UserError(f"{root}: more than {MAX_FILES} files; point statebox audit at a smaller folder")
            continue  # subagent transcripts: read with the session file they belong to (`subagent_transcripts`)
        for name in sorted(files):
            seen += 1
            if seen > MAX_FILES:
                raise UserError(f"{root}: more than {MAX_FILES} files; point statebox audit at a smaller folder")
            path = here / name
            if not name.endswith((".eval", ".json", ".jsonl")):
                continue
            if path.is_symlink():
                if passed_over is not None:
                    passed_over.append(f"{path}: a symbolic link (never followed)")
                continue
            fmt = file_format(path)
            if fmt and only in (None, fmt):
                found.append(Found(fmt, path))
            elif fmt is None and name == HARBOR_TRAJECTORY and passed_over is not None:
                # Harbor's name for a trial's session: not one here is a trial missing from the rows
                passed_over.append(f"{path}: named like a Harbor trajectory, but no ATIF trajectory (no "
                                   f"\"schema_version\": \"ATIF-...\" and steps, or over {session_limits.DOCUMENT_BYTES_LIMIT} bytes)")
    return found


def walk_down(root: Path, onerror: Callable[[OSError], None]) -> Iterator[tuple[str, list[str], list[str]]]:
    """`os.walk(root, followlinks=False, onerror=...)` top-down, without its recursion: Python 3.11's walk recurses
    once per level, and a folder 1,100 levels deep handed to `statebox audit` ended in RecursionError, a traceback
    (found by probe). Same tuples, same order (a caller that sorts or prunes `dirs` in place steers it as it steers
    os.walk); a link to a folder is listed in `dirs` and never entered."""
    stack = [str(root)]
    while stack:
        top = stack.pop()
        dirs: list[str] = []
        files: list[str] = []
        links: set[str] = set()
        try:
            with os.scandir(top) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    (dirs if is_dir else files).append(entry.name)
                    if is_dir and entry.is_symlink():
                        links.add(entry.name)
        except OSError as error:
            onerror(error)
            continue
        yield top, dirs, files
        stack.extend(os.path.join(top, name) for name in reversed(dirs) if name not in links)


def _read_with_its_session(folder: Path) -> bool:
    """Whether `folder` is `<session>/subagents` beside a Claude Code session file `<session>.jsonl` (a regular
    file, not a link) that `claude_sessions` reads, and so its transcripts with it."""
    if folder.name != SUBAGENTS_DIR:
        return False
    session_file = folder.parent.parent / f"{folder.parent.name}.jsonl"
    try:
        regular = stat.S_ISREG(os.lstat(session_file).st_mode)
    except OSError:
        return False
    return regular and file_format(session_file) == "claude"


# ---------------------------------------------------------------------------
# sessions
# ---------------------------------------------------------------------------


@dataclass
class ExternalSession:
    """One session of another harness, normalised, with what the log recorded beside it."""

    name: str
    fmt: str
    source: Path
    log: AuditLog
    keys: list[str] = field(default_factory=list)  # the names --items may use for it
    recorded: list[dict[str, Any]] | None = None  # a statebox export's recorded findings
    task_score: str = ""  # the log's own score, for the report
    merged: tuple[Path, ...] = ()  # other files read into it (a trajectory's subagents' files)


def events_of(drafts: Iterable[tuple[int, EventDraft]], source: str, first_seq: int = 0) -> list[Event]:
    """Drafts -> numbered events (seq from `first_seq`), each pointing at its line (or message, or step)."""
    return [new_event(seq, d.kind, source, line, d.text, dict(d.data))
            for seq, (line, d) in enumerate(drafts, start=first_seq)]


def read_within(path: Path, most: int) -> tuple[bytes, str | None]:
    """A session file's bytes, or (b"", the note saying so) where it holds more than `most`: at most `most` + 1
    bytes are read whatever its size, so a file over a limit is flagged (`audit_limit`), never an error that
    would end the audit of every other session."""
    with open_regular(path, cap=sys.maxsize) as fh:
        size = os.fstat(fh.fileno()).st_size
        data = read_upto(fh, most + 1)
    if len(data) > most:
        return b"", past_bytes(path.name, max(size, len(data)), most)
    return data, None


def session_lines(path: Path) -> tuple[bytes, list[str]]:
    """A CLI's session file, up to SESSION_LINE_LIMIT lines (session_limits), and the notes it leaves when cut;
    one over MAX_LOG_BYTES is not read at all."""
    data, unread = read_within(path, MAX_LOG_BYTES)
    limits = [unread] if unread is not None else []
    return cut_to_lines(data, path.name, limits)[0], limits


@dataclass(frozen=True)
class Reading:
    """How a CLI's session file is read: by its candidate lines (`prefilter`, the default) or every line (None:
    `--full`), and what `--items` (or the command line) tells of the session named by one of its keys, which the
    candidate lines are looked for by (its secret values)."""

    prefilter: Prefilter | None = None
    given: Callable[[list[str]], SessionFacts | None] = lambda keys: None

    def of(self, keys: list[str], attempt_id: str) -> "SessionReading":
        """How the files of the session named by `keys` are read: its secret values found once for all of them (its
        own file, its subagents')."""
        if self.prefilter is None:
            return WHOLE
        facts = merge_facts(AttemptFacts(attempt_id=attempt_id), self.given(keys))
        return SessionReading(self.prefilter, self.prefilter.secret_pattern(facts))


@dataclass(frozen=True)
class SessionReading:
    """How one session's files are read: by their candidate lines (`prefilter`), looked for by its secret values, or
    every line (no prefilter: `--full`)."""

    prefilter: Prefilter | None = None
    secret: Literals | None = None


FULL = Reading()
WHOLE = SessionReading()


def claude_file_drafts(data: bytes, reading: SessionReading) -> list[tuple[int, EventDraft]]:
    """A Claude Code session file's drafts: by its candidate lines unless `reading` is the full one."""
    if reading.prefilter is None:  # lines decoded as parsed, never all held
        return claude_session.parse_lines(decoded_lines(data), line_loads(data))
    candidates = session_file_prefilter.candidate_lines(data, reading.prefilter, reading.secret)
    return session_file_prefilter.claude_drafts(data, candidates)


def rollout_drafts(data: bytes, reading: SessionReading) -> list[tuple[int, EventDraft]]:
    """A Codex rollout's drafts: by its candidate lines unless `reading` is the full one."""
    if reading.prefilter is None:
        return codex_rollout.parse_lines(decoded_lines(data), line_loads(data))
    candidates = session_file_prefilter.candidate_lines(data, reading.prefilter, reading.secret,
                                                        session_file_prefilter.CODEX_SPAWN_WORDS)
    return session_file_prefilter.codex_drafts(data, candidates)


def claude_sessions(path: Path, reading: Reading = FULL) -> Iterator[ExternalSession]:
    data, limits = session_lines(path)
    first = _first_object(data)
    session_file = first is not None and claude_session.looks_like_session(first)
    keys = [path.stem, path.name]
    session_reading = reading.of(keys, path.stem)
    drafts = claude_file_drafts(data, session_reading) if session_file else \
        claude_stream.parse_lines(decoded_lines(data), line_loads(data))
    del data
    events = events_of(drafts, path.name)
    del drafts  # not held while the session is judged (this generator waits at its yield meanwhile)
    sources = [path.name]
    if path.suffix == ".jsonl":  # a session file; a stream-json log saved beside such a folder holds its session too
        transcripts = subagent_transcripts(path, limits)
        for n, sub in enumerate(transcripts):
            if len(events) >= session_limits.SESSION_EVENT_LIMIT:  # session_log cuts the events there too
                limits.append(_unread_past_limit(path, len(transcripts) - n, "subagent transcripts"))
                break  # the files past the limit are not even read
            events.extend(subagent_events(sub, len(events), limits, session_reading))
            sources.append(f"{SUBAGENTS_DIR}/{sub.name}")
    log = session_log(events, AttemptFacts(attempt_id=path.stem, agent="claude-code"), sources, limits=limits)
    del events
    yield ExternalSession(path.stem, "claude", path, log, keys=keys)


def _unread_past_limit(path: Path, count: int, what: str) -> str:
    return f"{path.name}: {count} {what} not read (the session's events reached {session_limits.SESSION_EVENT_LIMIT})"


# Claude Code 2.x writes what each subagent (its `Agent` / `Task` tool) did to a file of its own beside the session's:
# `<project>/<session>/subagents/agent-<id>.jsonl` (with an `agent-<id>.meta.json`), every line `isSidechain`.
SUBAGENTS_DIR = "subagents"
MAX_SUBAGENT_FILES = 10_000


def subagent_folder(session_file: Path) -> Path:
    """Where Claude Code keeps the subagent transcripts of the session in `session_file`."""
    return session_file.parent / session_file.stem / SUBAGENTS_DIR


def subagent_transcripts(session_file: Path, limits: list[str]) -> list[Path]:
    """The subagent transcripts of a Claude Code session file, in name order; what could not be read is told to
    `limits` (an `audit_limit` finding: the session is flagged, never clean).

    Why they belong to the session: a subagent's commands are the agent's own, run for it while its `Agent` call
    waits, and its answer comes back to the session that answers the question. Audited apart (as other sessions
    of a folder), a cheat delegated to a subagent left the session that scored clean and a row of its own named
    `agent-<id>` that no item maps to. The folders on the way are taken only as real folders (a link could make
    another session's subagents, or any folder, this one's), each file as a regular file (`open_regular`)."""
    folder = subagent_folder(session_file)
    for step in (folder.parent, folder):
        try:
            mode = os.lstat(step).st_mode
        except FileNotFoundError:
            return []  # no subagent ran (most sessions)
        except OSError as exc:
            limits.append(f"{step}: subagent transcripts not read ({exc.strerror or exc})")
            return []
        if not stat.S_ISDIR(mode):
            if step == folder or stat.S_ISLNK(mode):  # `<session>` as a plain file is none of Claude Code's
                limits.append(f"{step}: subagent transcripts not read (not a folder: {_file_kind(mode)})")
            return []
    found: list[Path] = []
    odd, first_odd = 0, ""  # named like a transcript but no regular file: said once, however many
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if not entry.name.endswith(".jsonl"):
                    continue
                if not entry.is_file(follow_symlinks=False):
                    odd, first_odd = odd + 1, first_odd or entry.name
                    continue
                found.append(folder / entry.name)
                if len(found) > MAX_SUBAGENT_FILES:  # not listed on: a folder of millions would be held whole
                    limits.append(f"{folder}: more than {MAX_SUBAGENT_FILES} subagent transcripts, "
                                  f"{MAX_SUBAGENT_FILES} of them read")
                    break
    except OSError as exc:
        limits.append(f"{folder}: subagent transcripts not read ({exc.strerror or exc})")
        return []
    if odd:
        limits.append(f"{folder / first_odd}: {odd} subagent transcript(s) not read (not a regular file)")
    return sorted(found)[:MAX_SUBAGENT_FILES]


def _file_kind(mode: int) -> str:
    return "a symbolic link" if stat.S_ISLNK(mode) else "a file" if stat.S_ISREG(mode) else "a special file"


def subagent_events(path: Path, first_seq: int, limits: list[str], reading: SessionReading = WHOLE) -> list[Event]:
    """One subagent transcript's events, numbered on from `first_seq`, each marked `subagent` (and `sidechain`).

    The task the subagent was given is a user line of its file, but the agent wrote it (as its `Agent` call's
    input): read as a user prompt, the only text that may excuse an echo of itself, it let the agent excuse what it
    had its subagent look for by naming it in the task. So it is the agent's text here (`role: assistant`)."""
    try:
        data, cut = session_lines(path)
    except UserError as exc:  # gone or changed between the listing and the open: said, and flagged
        limits.append(f"{exc}: a subagent transcript not read")
        return []
    limits.extend(cut)
    drafts = claude_file_drafts(data, reading)  # looked for by the session's secret values
    del data
    source = f"{SUBAGENTS_DIR}/{path.name}"
    events: list[Event] = []
    for seq, (line, draft) in enumerate(drafts, start=first_seq):
        marked = {**draft.data, "subagent": path.stem, "sidechain": True}
        if draft.kind is EventKind.message and marked.get("role") == "user":
            marked["role"] = "assistant"
            marked["subagent_task"] = True
        events.append(new_event(seq, draft.kind, source, line, draft.text, marked))
    return events


def codex_sessions(path: Path, children: tuple[tuple[Path, str], ...] = (), reading: Reading = FULL) -> Iterator[ExternalSession]:
    """One Codex rollout (or `exec --json` log) with the rollouts of the subagents it started (`children`, from
    `rollout_families`), their events after its own."""
    data, limits = session_lines(path)
    first = _first_object(data)
    rollout = first is not None and codex_rollout.looks_like_rollout(first)
    sid = (codex_rollout.session_id(decoded_lines(data)) or path.stem) if rollout else path.stem
    keys = [sid, path.stem, path.name]
    session_reading = reading.of(keys, sid)  # its subagents' rollouts are looked for by its secret values too
    drafts = rollout_drafts(data, session_reading) if rollout else codex_jsonl.parse_lines(decoded_lines(data), line_loads(data))
    del data
    events = events_of(drafts, path.name)
    del drafts  # not held while the session is judged (this generator waits at its yield meanwhile)
    sources = [path.name]
    read: set[str] = set()
    for n, (child, thread) in enumerate(children):
        if len(events) >= session_limits.SESSION_EVENT_LIMIT:  # session_log cuts the events there too
            limits.append(_unread_past_limit(path, len(children) - n, "subagent rollouts"))
            break  # the rollouts past the limit are not even read
        events.extend(child_rollout_events(child, len(events), limits, session_reading))
        sources.append(child.name)
        read.add(thread)
    if rollout:
        unread = sorted(spawned_agents(events) - read)
        if unread:  # started, but its rollout was not beside this one (another day's folder, not handed over)
            limits.append(f"{path.name}: {len(unread)} subagent(s) it started not read, their rollouts not found "
                          f"beside it ({', '.join(unread[:3])}{' ...' if len(unread) > 3 else ''})")
    log = session_log(events, AttemptFacts(attempt_id=sid, agent="codex"), sources, limits=limits)
    del events
    yield ExternalSession(sid, "codex", path, log, keys=keys)


# Codex's subagents: its `spawn_agent` tool (namespace `multi_agent_v1`, offered by default) starts a thread whose
# rollout is a file of its own (`rollout-<time>-<thread id>.jsonl`), its `session_meta` naming the parent thread.
SPAWN_TOOL = "spawn_agent"
ROLLOUT_HEAD_BYTES = 4 << 20  # a `session_meta` line holds the base instructions (~20 KB); more is none of Codex's


@dataclass(frozen=True)
class RolloutHead:
    """A rollout's thread id and the thread that started it (None: a session of its own)."""

    thread: str
    parent: str | None


def rollout_head(path: Path) -> RolloutHead | None:
    """What a rollout's first line (`session_meta`) says of its thread, or None where it is no such line (read
    as a hostile file: at most ROLLOUT_HEAD_BYTES of it)."""
    try:
        with open_regular(path) as handle:
            head = read_upto(handle, HEAD_BYTES)  # the line is most often within it: the rest of the file is not read
            if b"\n" not in head and len(head) == HEAD_BYTES:
                head += read_upto(handle, ROLLOUT_HEAD_BYTES - HEAD_BYTES)
    except UserError:
        return None
    line = head.split(b"\n", 1)[0]
    try:
        meta = json_value(line.decode("utf-8", "replace"))
    except ValueError:
        return None
    if not isinstance(meta, dict) or meta.get("type") != "session_meta" or not isinstance(meta.get("payload"), dict):
        return None
    payload = meta["payload"]
    thread = payload.get("id")
    if not isinstance(thread, str) or not thread:
        return None
    spawn = object_at(object_at(object_at(payload, "source"), "subagent"), "thread_spawn")
    parent = payload.get("parent_thread_id") or spawn.get("parent_thread_id")
    return RolloutHead(thread, parent if isinstance(parent, str) and parent and parent != thread else None)


def rollout_families(found: list[Found], lone_file: bool) -> list[Found]:
    """`found` with each Codex subagent's rollout moved under the session that started it (`Found.children`, all
    its descendants in time order), so a session is judged with what its subagents did and they make no rows of
    their own. For a lone rollout, its subagents are looked for beside it (its day's folder and the next day's).

    Why: audited apart, a session that had its subagent walk the disk and read an answer key was clean, and the
    subagent's rollout made a row no `--items` entry names (found by this round's attack, recorded with the real
    CLI: tests/audits/cli_subagent_files/). A subagent whose starting session is not among them is a session of its
    own, as before; a session whose started subagents are not all found is flagged (`codex_sessions`)."""
    rollouts = [entry for entry in found if entry.fmt == "codex"]
    if not rollouts:
        return found
    if lone_file:
        candidates = _sibling_rollouts(rollouts[0].path)
    else:
        candidates = [entry.path for entry in rollouts]
    heads = {path: head for path in candidates if (head := rollout_head(path)) is not None}
    by_thread: dict[str, Path] = {}
    for path in sorted(heads):
        by_thread.setdefault(heads[path].thread, path)  # a thread id claimed twice: the first by name
    families: dict[Path, list[tuple[Path, str]]] = {}
    for path, head in heads.items():
        root = _root_of(path, heads, by_thread) if by_thread.get(head.thread) == path else None
        if root is not None and root != path:
            families.setdefault(root, []).append((path, head.thread))
    if lone_file:
        own = families.get(rollouts[0].path, [])
        return [Found("codex", rollouts[0].path, tuple(sorted(own)))] if own else found
    moved = {child for members in families.values() for child, _ in members}
    return [Found(entry.fmt, entry.path, tuple(sorted(families.get(entry.path, [])))) if entry.fmt == "codex" else entry
            for entry in found if not (entry.fmt == "codex" and entry.path in moved)]


def _root_of(path: Path, heads: dict[Path, RolloutHead], by_thread: dict[str, Path]) -> Path | None:
    """The rollout that started the chain of threads `path` belongs to (itself where its parent is not among
    them), or None where the parents claimed run in a circle: then none of them is anyone's subagent, each is a
    session of its own (moved under one another, a circle of forged heads would leave no row at all)."""
    seen, at = {heads[path].thread}, path
    while (parent := heads[at].parent) is not None and parent in by_thread:
        if parent in seen:
            return None
        seen.add(parent)
        at = by_thread[parent]
    return at


_DAY_PART = re.compile(r"[0-9]{2}|[0-9]{4}")  # a part of a Codex day folder's path: YYYY, MM or DD


def _sibling_rollouts(path: Path) -> list[Path]:
    """The rollouts in a lone rollout's folder (itself included) and in the next day's folder, regular files only, at
    most MAX_SUBAGENT_FILES.

    Why the next day's: Codex files a rollout under the day its thread started (`sessions/YYYY/MM/DD/`), so a
    subagent a session started after midnight lies in the next day's folder; read from its own day alone, the
    session was flagged for a subagent it had left unread. A folder that is a link is not followed there (the
    rollout's own folder is the one the user named)."""
    out = [path]
    for folder in (path.parent, *_next_day_folder(path.parent)):
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.startswith("rollout-") and entry.name.endswith(".jsonl") and entry.name != path.name \
                            and entry.is_file(follow_symlinks=False):
                        out.append(folder / entry.name)
                        if len(out) > MAX_SUBAGENT_FILES:
                            return out
        except OSError:
            pass  # its started subagents then go unread, and the session is flagged for them
    return out


def _next_day_folder(folder: Path) -> list[Path]:
    """`[.../YYYY/MM/DD+1]` for a Codex day folder `.../YYYY/MM/DD` (across a month's or a year's end), where it
    exists and is no link; [] for any other folder."""
    names = (folder.parent.parent.name, folder.parent.name, folder.name)
    if not all(_DAY_PART.fullmatch(n) for n in names):
        return []
    try:
        after = date(int(names[0]), int(names[1]), int(names[2])) + timedelta(days=1)
    except ValueError:  # not a calendar day (2026/13/40)
        return []
    nxt = folder.parent.parent.parent / f"{after.year:04d}" / f"{after.month:02d}" / f"{after.day:02d}"
    try:
        return [nxt] if stat.S_ISDIR(os.lstat(nxt).st_mode) else []
    except OSError:
        return []


def spawned_agents(events: list[Event]) -> set[str]:
    """The thread ids `spawn_agent` calls in `events` answered with (`{"agent_id": ...}`)."""
    calls = {str(e.data.get("call_id")) for e in events
             if e.kind is EventKind.tool_call and e.data.get("tool") == SPAWN_TOOL and e.data.get("call_id")}
    out: set[str] = set()
    for event in events:
        if event.kind is EventKind.tool_output and str(event.data.get("call_id")) in calls:
            try:
                answer = json_value(event.text)
            except ValueError:
                continue
            agent = answer.get("agent_id") if isinstance(answer, dict) else None
            if isinstance(agent, str) and agent:
                out.add(agent)
    return out


def child_rollout_events(path: Path, first_seq: int, limits: list[str], reading: SessionReading = WHOLE) -> list[Event]:
    """A subagent's rollout's events, numbered on from `first_seq`, each marked `subagent`; its user messages (the
    task the agent wrote, the history a forked subagent was handed) are no prompt that excuses (`subagent_task`)."""
    try:
        data, cut = session_lines(path)
    except UserError as exc:  # gone or changed since it was found: said, and flagged
        limits.append(f"{exc}: a subagent's rollout not read")
        return []
    limits.extend(cut)
    drafts = rollout_drafts(data, reading)  # looked for by the session's secret values
    del data
    events: list[Event] = []
    for seq, (line, draft) in enumerate(drafts, start=first_seq):
        marked = {**draft.data, "subagent": path.stem}
        if draft.kind is EventKind.message and marked.get("role") == "user":
            marked["subagent_task"] = True
        events.append(new_event(seq, draft.kind, path.name, line, draft.text, marked))
    return events


def harbor_sessions(path: Path) -> Iterator[ExternalSession]:
    """One trajectory file, or every `trajectory.json` of a job / trial folder."""
    files = [path] if path.is_file() else [f.path for f in discover(path, "harbor")]
    for file in files:
        trial_dir = file.parent.parent if file.parent.name == "agent" else file.parent
        trial = trial_dir.name
        result = _trial_result(trial_dir)
        raw, unread = read_within(file, session_limits.DOCUMENT_BYTES_LIMIT)
        if unread is not None:  # judged unread (session_limits): flagged, and the job's other trials audited
            facts = AttemptFacts(attempt_id=trial, agent="harbor", item_id=str(result.get("task_name") or ""))
            yield ExternalSession(trial, "harbor", file, session_log([], facts, [file.name], limits=[unread]), keys=[trial])
            continue
        steps_most = session_limits.SESSION_LINE_LIMIT  # a step is a trajectory's line
        cut: list[str] = []
        try:
            trajectory, steps = atif_trajectory.parse_trajectory(raw, steps_most, cut)
        except (ValueError, ValidationError) as exc:
            raise DataError(file, None, f"not a readable ATIF trajectory ({str(exc).splitlines()[0][:160]})") from None
        del raw
        limits = [past_steps(file.name, steps, steps_most)] if steps > steps_most else []
        limits += [f"{file.name}: {note}" for note in cut]
        extra = {**({"task_name": result["task_name"]} if isinstance(result.get("task_name"), str) else {}),
                 **(trajectory.extra or {})}
        raw_own = extra.get("statebox")
        own: dict[str, Any] = raw_own if isinstance(raw_own, dict) else {}
        session_id = trajectory.session_id
        name = str(own.get("attempt_id") or session_id or trial)
        facts = AttemptFacts(attempt_id=name, agent=str(own.get("agent") or trajectory.agent.name or "harbor"),
                             item_id=str(own.get("item_id") or extra.get("item_id") or extra.get("task_name") or ""),
                             original_name=str(extra.get("original_name") or ""),
                             question=str(extra.get("question") or ""))
        facts.original_stem = Path(facts.original_name).stem if facts.original_name else ""
        if not facts.question:
            facts.question = next((atif_trajectory.text_of(s.message) for s in trajectory.steps if s.source == "user"), "")
        events, sources, merged = trajectory_events(file, trajectory, limits)
        del trajectory
        log = session_log(events, facts, sources, limits=limits)
        del events
        recorded = list(list_of(own.get("findings"))) if own else None
        score = own.get("score") if own else (result.get("verifier_result") or {}).get("rewards") \
            if isinstance(result.get("verifier_result"), dict) else None
        yield ExternalSession(name, "harbor", file, log, keys=[name, session_id, trial], recorded=recorded,
                              task_score=json.dumps(score) if score else "", merged=merged)


def trajectory_events(file: Path, trajectory: atif_trajectory.AtifTrajectoryIn,
                      limits: list[str]) -> tuple[list[Event], list[str], tuple[Path, ...]]:
    """A trajectory's events with its subagents' (`atif_trajectory.subagent_drafts`): those it holds, then those in
    files of their own that its references name (`trajectory_path`, beside it, read as it was, theirs in turn), each
    marked `subagent`; and the sources and the other files read. A reference to none of these (a URL, a path
    leaving its folder, a file missing or not regular) is told to `limits`: the session is flagged, never clean.

    Why: a subagent's steps are the agent's doing, and a trajectory that put a cheat in a subagent's steps was judged
    on its own steps alone (clean)."""
    events = events_of(atif_trajectory.step_drafts(trajectory), file.name)
    sources = [file.name]
    merged: list[Path] = []
    queue: list[tuple[Path, atif_trajectory.AtifTrajectoryIn]] = [(file, trajectory)]
    seen = {_same_file_key(file)}
    unresolved: dict[str, tuple[int, str]] = {}  # per file: how many references were not read, and the first's why
    while queue:
        where, doc = queue.pop(0)
        embedded = doc.embedded()
        names = {n for sub in embedded for n in (sub.trajectory_id, sub.session_id) if n}
        for name, drafts in atif_trajectory.subagent_drafts(doc):
            source = f"{where.name}#{name}"
            events.extend(events_of(drafts, source, len(events)))
            sources.append(source)
        for ref in [r for t in [doc, *embedded] for r in t.refs()]:
            if (ref.trajectory_id and ref.trajectory_id in names) or (ref.session_id and ref.session_id in names):
                continue  # held in the document
            target, why = _referenced_trajectory(where, ref.trajectory_path)
            if target is None:
                count, first = unresolved.get(where.name, (0, why))
                unresolved[where.name] = (count + 1, first)
                continue
            key = _same_file_key(target)
            if key in seen:
                continue  # read already (a file that names itself, or two references to one file)
            seen.add(key)
            if len(events) >= session_limits.SESSION_EVENT_LIMIT:
                limits.append(f"{where.name}: a subagent's trajectory {target.name} not read (the session's events "
                              f"reached {session_limits.SESSION_EVENT_LIMIT})")
                continue
            raw, unread = read_within(target, session_limits.DOCUMENT_BYTES_LIMIT)
            cut: list[str] = []
            try:
                sub, _ = atif_trajectory.parse_trajectory(raw, session_limits.SESSION_LINE_LIMIT, cut) if unread is None \
                    else (None, 0)
            except (ValueError, ValidationError):
                sub = None
            if sub is None:
                limits.append(f"{target.name}: a subagent's trajectory not read ({unread or 'not a readable ATIF trajectory'})")
                continue
            limits.extend(f"{target.name}: {note}" for note in cut)
            name = atif_trajectory.subagent_name(sub, len(merged) + 1)
            events.extend(events_of(atif_trajectory.step_drafts(sub, name), target.name, len(events)))
            sources.append(target.name)
            merged.append(target)
            queue.append((target, sub))
    limits.extend(f"{name}: {count} subagent's trajectory not read ({why})" if count == 1 else
                  f"{name}: {count} subagents' trajectories not read (the first: {why})"
                  for name, (count, why) in unresolved.items())
    return events, sources, tuple(merged)


def _referenced_trajectory(where: Path, reference: str | None) -> tuple[Path | None, str]:
    """The file a `trajectory_path` names, taken only as a regular file in the referring file's folder or below
    it (no link on the way), or None and why not."""
    if not reference:
        return None, "referenced by id only, and not held in the document"
    parts = PurePosixPath(reference).parts
    if "://" in reference or reference.startswith(("/", "\\")) or ".." in parts or not parts or "\\" in reference:
        return None, f"its path {reference[:120]!r} is not a file beside the trajectory"
    target = where.parent
    for part in parts:
        target = target / part
        try:
            mode = os.lstat(target).st_mode
        except OSError:
            return None, f"{reference[:120]!r} not found beside the trajectory"
        if stat.S_ISLNK(mode):
            return None, f"{reference[:120]!r} is a symbolic link (not followed)"
    if not stat.S_ISREG(mode):
        return None, f"{reference[:120]!r} is not a regular file"
    return target, ""


def _same_file_key(path: Path) -> tuple[int, int] | str:
    try:
        info = os.stat(path)
    except OSError:
        return str(path)
    return (info.st_dev, info.st_ino)


def _trial_result(trial_dir: Path) -> dict[str, Any]:
    """A Harbor trial's `result.json` (its `task_name`, the verifier's `rewards`), when it has a readable one:
    beside facts only (the item id, the task score in the report), never evidence, so a missing or broken
    one is no error."""
    path = trial_dir / "result.json"
    if not path.is_file() or path.is_symlink():
        return {}
    try:
        value = json_value(read_capped(path, MAX_ITEMS_BYTES))
    except (UserError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _inspect_reader() -> Callable[..., Any]:
    # inspect_ai is heavy (~1 s to import, a large tree): loaded only when an Inspect log is audited
    from inspect_ai.log import read_eval_log

    return read_eval_log


def read_inspect_log(path: Path) -> "EvalLog":
    """The whole log through inspect_ai's own reader, from a handle opened as a hostile file and admitted first
    (`inspect_admission`: an `.eval`'s zip checked entry by entry, decompressed within its declared sizes; the JSON
    within its budget; the references inside it within theirs). `--write-scores` reads it so, to write a `.json` copy;
    the audit reads an `.eval` a sample at a time (`opened_inspect_log`)."""
    with open_regular(path) as fh:
        _admit(fh, path, path.suffix == ".eval")
        return _read_whole(fh, path)


def _read_whole(fh: BinaryIO, path: Path) -> "EvalLog":
    """An admitted log, every sample, through inspect_ai's reader (attachments resolved)."""
    read_eval_log = _inspect_reader()
    return _inspect_read(path, lambda: read_eval_log(fh, resolve_attachments=True,
                                                     format="eval" if path.suffix == ".eval" else "json"))


def _admit(fh: BinaryIO, path: Path, eval_zip: bool) -> None:
    if eval_zip:
        inspect_admission.admit_eval(fh, path)
    else:
        inspect_admission.admit_json(fh, path)


def _inspect_read(path: Path, read: Callable[[], T]) -> T:
    """`read()` (a call into inspect_ai's reader), its failure as the one line naming the log."""
    try:
        return read()
    except Exception as exc:  # noqa: BLE001 - inspect raises many kinds; the user needs one line
        raise DataError(path, None, f"not a readable Inspect log ({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''})") from None


@dataclass
class EvalStream:
    """An `.eval` read a sample at a time: its open, admitted file (a forked worker reads the same file through it),
    its sample entries (name, id as text, epoch) in order, and its format version."""

    fd: int
    entries: list[tuple[str, str, int]]
    version: int


@dataclass
class InspectSamples:
    """An admitted Inspect log: its header (no samples), the (id as text, epoch) of each of its samples in the order
    they come, and the samples themselves, read as they are asked for (`stream`: how, where a sample at a time;
    None for a log read whole)."""

    header: "EvalLog"  # without its samples
    keys: list[tuple[str, int]]
    samples: Iterator["EvalSample"]
    stream: EvalStream | None = None


SAMPLE_ALONE_EVAL = {"created": "2000-01-01T00:00:00+00:00", "task": "sample", "dataset": {}, "model": "none", "config": {}}
_SAMPLE_ENTRY = re.compile(r"samples/(.+)_epoch_([0-9]{1,9})\.json", re.S)


@contextmanager
def opened_inspect_log(path: Path) -> Iterator[InspectSamples]:
    """An Inspect log, admitted as `read_inspect_log` admits it, whose samples an `.eval` gives one at a time.

    Why: inspect_ai's reader builds every sample of a log before the first is returned: 127 MB of samples (3,000 of 63
    messages) held ~600 MB, so a 2 GB log (what admission lets in) wanted ~10 GB. Each sample is still read by
    inspect_ai's own public reader: its entry, as admitted (within its declared size, its CRC checked), goes with
    a least header into a zip of its own in memory, which `read_eval_log` reads with the attachments
    resolved, exactly as it reads a whole log (the same validation, events data and timelines). Samples come in the
    order inspect_ai sorts them (epoch, then id; an integer id as it zero-fills it), told from the entry names and
    the header's typed sample ids. A `.json` log is one JSON text: read whole, as before; so is an `.eval` whose
    sample entries are not named as inspect_ai names them (a log it did not write)."""
    read_eval_log = _inspect_reader()
    eval_zip = path.suffix == ".eval"
    with open_regular(path) as fh:
        _admit(fh, path, eval_zip)
        entries: list[tuple[str, str, int]] | None = None
        if eval_zip:
            header = _inspect_read(path, lambda: read_eval_log(fh, header_only=True, format="eval"))
            archive = _inspect_read(path, lambda: zipfile.ZipFile(fh))
            entries = _sample_entries(archive.namelist(), header)
        if entries is None:
            log = _read_whole(fh, path)
            samples = list(log.samples or [])
            log.samples = None
            yield InspectSamples(log, [(str(s.id), s.epoch) for s in samples], iter(samples))
            return
        yield InspectSamples(header, [(i, e) for _, i, e in entries],
                             (sample_alone(archive, path, name, (i, e), header.version) for name, i, e in entries),
                             EvalStream(fh.fileno(), entries, header.version))


def sample_alone(archive: zipfile.ZipFile, path: Path, name: str, key: tuple[str, int], version: int) -> "EvalSample":
    """One sample entry of an admitted `.eval`, read by inspect_ai's public reader from a zip of its own (the entry and
    a least header: the least an EvalLog is, since a sample is validated without it; not the log's own `eval`, which
    a crafted log can make megabytes long to be parsed again with each of its samples)."""
    read_eval_log = _inspect_reader()
    alone = io.BytesIO()
    with zipfile.ZipFile(alone, "w", zipfile.ZIP_STORED) as out:
        out.writestr("header.json", json.dumps({"version": version, "eval": SAMPLE_ALONE_EVAL}))
        out.writestr(name, archive.read(name))
    alone.seek(0)
    sample: EvalSample = _inspect_read(path, lambda: read_eval_log(alone, resolve_attachments=True, format="eval").samples[0])
    if (str(sample.id), sample.epoch) != key:
        raise DataError(path, None, f"entry {name!r} holds sample {str(sample.id)[:80]!r} epoch {sample.epoch}, "
                                    "not the one its name says")
    return sample


def _sample_entries(names: list[str], header: Any) -> list[tuple[str, str, int]] | None:
    """(entry name, id as text, epoch) of each sample entry, in inspect_ai's order (`sort_samples`: epoch, then the id,
    an integer one zero-filled to 20), or None where an entry is not named `samples/ID_epoch_N.json`."""
    typed = {str(i): i for i in (header.eval.dataset.sample_ids or [])}
    found: list[tuple[tuple[int, str], str, str, int]] = []
    for name in dict.fromkeys(names):  # a re-logged member is listed twice; reading it gives its last copy
        if not (name.startswith("samples/") and name.endswith(".json")):
            continue
        match = _SAMPLE_ENTRY.fullmatch(name)
        if match is None:
            return None
        text, epoch = match.group(1), int(match.group(2))
        value = typed.get(text, text)
        found.append(((epoch, value if isinstance(value, str) else str(value).zfill(20)), name, text, epoch))
    found.sort(key=lambda entry: entry[0])
    return [(name, text, epoch) for _, name, text, epoch in found]


def inspect_sample_name(sample: Any, unique_ids: bool) -> str:
    return str(sample.id) if unique_ids else f"{sample.id}@epoch{sample.epoch}"


def _input_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    for message in value or []:
        if getattr(message, "role", "") == "user":
            text, _ = inspect_sample.content_text(getattr(message, "content", ""))
            return text
    return ""


def inspect_sessions(path: Path) -> Iterator[ExternalSession]:
    """One session per sample and epoch, each sample read as it is judged (`opened_inspect_log`)."""
    with opened_inspect_log(path) as log:
        context = _inspect_context(log)
        for sample in log.samples:
            yield _inspect_session(path, sample, *context)


def _inspect_context(log: InspectSamples) -> tuple[bool, bool, str]:
    """What naming and judging each sample needs from the whole log: whether its ids are unique (else a session is
    `ID@epochN`), whether it is a statebox export (its recorded findings are carried), the agent a sample names none."""
    ids = [key for key, _ in log.keys]
    header = log.header.eval
    packages = getattr(header, "packages", None) or {}
    is_export = "statebox" in packages and getattr(header, "task", "") == "statebox"
    default_agent = str(getattr(header, "solver", None) or getattr(header, "model", None) or "inspect")
    return len(set(ids)) == len(ids), is_export, default_agent


def _inspect_session(path: Path, sample: "EvalSample", unique: bool, is_export: bool, default_agent: str) -> ExternalSession:
    meta = sample.metadata or {}
    name = inspect_sample_name(sample, unique)
    facts = AttemptFacts(attempt_id=name, agent=str(meta.get("agent") or default_agent),
                         item_id=str(meta.get("item_id") or sample.id),
                         original_name=str(meta.get("original_name") or ""),
                         question=str(meta.get("question") or _input_text(sample.input)))
    facts.original_stem = Path(facts.original_name).stem if facts.original_name else ""
    completion = sample.output.completion if sample.output is not None else ""
    messages = list(sample.messages or [])
    drafts = inspect_sample.sample_drafts(messages, completion or "")
    drafts += inspect_sample.subagent_tool_drafts(list(sample.events or []), messages, len(messages) + 2)
    source = f"{path.name}#{name}"
    audit_log = session_log(events_of(drafts, source), facts, [source])
    recorded = list(list_of(meta.get("findings"))) if is_export else None
    scores = {k: v.value for k, v in (sample.scores or {}).items() if k != AUDIT_SCORER}
    return ExternalSession(name, "inspect", path, audit_log,
                           keys=[name, str(sample.id), f"{sample.id}@epoch{sample.epoch}"],
                           recorded=recorded, task_score=json.dumps(scores, default=str) if scores else "")


# ---------------------------------------------------------------------------
# auditing
# ---------------------------------------------------------------------------

AUDIT_SCORER = "statebox_audit"


CARRIED_PER_KIND = 100  # recorded findings of one category and severity carried at most (a hostile export can list millions)


def carried_findings(session: ExternalSession, rejudged: list[Finding]) -> tuple[list[Finding], int]:
    """The findings a statebox export recorded that its audit did not make again from the export's own actions, marked
    as carried, and how many more were left uncarried past CARRIED_PER_KIND of one category and severity: each recorded
    finding is matched to a re-judged one of its category and severity not matched yet, and carried where none is left.

    Why every such finding and not only those wanting the run's secret facts or host evidence: an export holds the
    attempt's events.jsonl alone. A cheat the gateway log alone witnessed (the agent left it out of its own log) was
    contaminated in the run folder and clean in every export of it (tests/audits/export_hunt.py found it); what the
    export lost is unknown to its reader, what the run found is recorded. So the export's verdict holds every finding
    the run's did, by category and severity, as many of each (up to the cap, past which the verdict and its categories
    are the same): carried findings only add (one the export's actions make again is not carried twice), and they can
    only raise a verdict."""
    unmatched: Counter[tuple[str, str]] = Counter((finding.category, finding.severity) for finding in rejudged)
    carried: Counter[tuple[str, str]] = Counter()
    out: list[Finding] = []
    past_cap = 0
    for raw in session.recorded or []:
        if not isinstance(raw, dict):
            continue
        category, severity = raw.get("category"), raw.get("severity")
        if not (isinstance(category, str) and isinstance(severity, str)) \
                or category not in _CATEGORIES or severity not in _SEVERITIES:
            continue  # not a finding statebox writes (a list or an object is not even hashable): nothing to carry
        kind = (category, severity)
        if unmatched[kind] > 0:
            unmatched[kind] -= 1
            continue
        if carried[kind] >= CARRIED_PER_KIND:
            past_cap += 1
            continue
        carried[kind] += 1
        # only text is shown, cut: a hostile export's value of another type is never turned into text
        event, rule, quote = raw.get("event"), _text_of(raw.get("rule")), _text_of(raw.get("quote"))
        where = f"; run event {event}" if type(event) is int else "; host evidence" if event is None else ""
        out.append(Finding(category=kind[0], severity=kind[1], event=None, quote=quote,
                           rule=f"{CARRIED_PREFIX}: {rule or kind[0]}{where}"))
    return out, past_cap


_CATEGORIES = frozenset(get_args(FindingCategory))
_SEVERITIES = frozenset(get_args(Severity))


def _text_of(value: object) -> str:
    """A recorded finding's text field as shown: a string cut to 200 characters, anything else nothing."""
    return value[:200] if isinstance(value, str) else ""


@dataclass
class AuditedSession:
    """A row of the audit, with where it came from (for the HTML report and --write-scores)."""

    row: AuditedAttempt
    fmt: str
    source: Path
    task_score: str = ""
    merged: tuple[Path, ...] = ()  # other files this row's session read (`ExternalSession.merged`)


def sessions_of(found: Found, reading: Reading = FULL) -> Iterator[ExternalSession]:
    """The sessions of one file or trial folder; `reading` says how a CLI's session file is read (`Reading`)."""
    if found.fmt == "inspect":
        return inspect_sessions(found.path)
    if found.fmt == "harbor":
        return harbor_sessions(found.path)
    if found.fmt == "claude":
        return claude_sessions(found.path, reading)
    if found.fmt == "codex":
        return codex_sessions(found.path, found.children, reading)
    raise UserError(f"{found.path}: unknown format {found.fmt!r}")  # pragma: no cover - discover's formats only


def with_facts(session: ExternalSession, items: dict[str, SessionFacts], flags: SessionFacts | None = None) -> ExternalSession:
    """The session with `--items`' facts for it (by any of its names), else the command line's."""
    session.log.facts = merge_facts(session.log.facts, given_facts(items, session.keys, flags))
    return session


def given_facts(items: dict[str, SessionFacts], keys: list[str], flags: SessionFacts | None = None) -> SessionFacts | None:
    """`--items`' facts for the session named by any of `keys`, else the command line's (`flags`)."""
    return next((items[k] for k in keys if k and k in items), None) or flags


def reading_for(items: dict[str, SessionFacts], flags: SessionFacts | None, full: bool) -> Reading:
    """How the CLIs' session files are read: every line (`full`), or by candidate lines looked for by each session's
    facts (`flags` given where the file holds one session, as for `with_facts`)."""
    if full:
        return FULL
    return Reading(default_prefilter(), lambda keys: given_facts(items, keys, flags))


def load_sessions(target: Path, fmt: str | None = None, items: dict[str, SessionFacts] | None = None,
                  full: bool = False) -> Iterator[ExternalSession]:
    """Every other harness's session under TARGET, normalised, facts merged, one at a time: what a labelled
    corpus in any format needs (`verdict_of(session.log)` judges one; statebox folders are left to
    `events.load_attempt`)."""
    for entry in discover(Path(target), fmt):
        if entry.fmt != "statebox":
            for session in sessions_of(entry, reading_for(items or {}, None, full)):
                yield with_facts(session, items or {})


def audit_session(session: ExternalSession, policy: Any, items: dict[str, SessionFacts],
                  flags: SessionFacts | None = None) -> AuditedAttempt:
    with_facts(session, items, flags)
    rejudged = run_rules(session.log)
    carried, past_cap = carried_findings(session, rejudged)
    verdict = verdict_from(session.log.facts.attempt_id, rejudged + carried, policy)
    notes = []
    if carried:
        notes.append(f"{len(carried)} finding(s) carried from the export's recorded verdict: the export holds "
                     "no decoy paths, canaries, original name, atime snapshot or witness log to judge them again")
    if past_cap:
        notes.append(f"{past_cap} more recorded finding(s) not carried: past {CARRIED_PER_KIND} of one category and "
                     "severity (the verdict and its categories are the same)")
    facts = session.log.facts
    return AuditedAttempt(session.name, facts.agent, facts.item_id, verdict, session.log, notes)


Progress = Callable[[int, int, int], None]  # (files done, files found, sessions judged so far)


def audit_path(target: Path, policy: Any, *, fmt: str | None = None, items: dict[str, SessionFacts] | None = None,
               flags: SessionFacts | None = None, keep_logs: bool = False, jobs: int = 1,
               progress: Progress | None = None, passed_over: list[str] | None = None,
               full: bool = False) -> list[AuditedSession]:
    """Audit every session under TARGET (a file or a folder of any supported format); nothing is written.

    `flags`: facts from the command line, for a target holding one session only. `keep_logs`: each row keeps
    its session's events (the HTML report shows the event behind each finding); without it a row holds its
    verdict only, so a folder of thousands of sessions is audited in the memory of one. `jobs` > 1 reads and
    judges the files found in that many worker processes (same rows, same order; a statebox run folder among
    them is audited by `audit_run` with as many); `workers.AUTO` (0), as many as `workers.workers` gives for
    their count. `progress` is told after each file; `passed_over`, of what
    could have held a session and was not read (`discover`). `full`: every line of every log is parsed (no
    prefilter: `audit_run`'s and `session_file_prefilter`'s reading against which the fast ones are tested)."""
    found = [Found("statebox", target)] if fmt == "statebox" else discover(target, fmt, passed_over)
    found = rollout_families(found, lone_file=Path(target).is_file())
    if not found:
        what = f"no {fmt} logs" if fmt else "no Inspect logs, ATIF trajectories, Claude Code or Codex session files or statebox runs"
        unread = f" (not read: {passed_over[0]}{f'; and {len(passed_over) - 1} more' if len(passed_over) > 1 else ''})" \
            if passed_over else ""
        raise UserError(f"{target}: {what} found{unread}")
    items = items or {}
    lone = flags if len(found) == 1 else None  # given only where the target is one file (and one session: _audit_file)
    out: list[AuditedSession] = []
    others = [entry for entry in found if entry.fmt != "statebox"]
    pool_size = workers(jobs, len(others))  # a statebox run folder among them is sized by audit_run, from `jobs`
    pool = ProcessPoolExecutor(max_workers=min(pool_size, len(others))) if pool_size > 1 and len(others) > 1 else None
    try:
        judged = iter(pool.map(_audit_file, others, repeat(policy), repeat(items), repeat(lone), repeat(keep_logs),
                               repeat(full), chunksize=max(1, len(others) // (pool_size * 8)))) if pool is not None else None
        for number, entry in enumerate(found, start=1):
            if entry.fmt == "statebox":
                out.extend(AuditedSession(row, "statebox", entry.path)
                           for row in audit_run(entry.path, policy, write=False, keep_logs=keep_logs, jobs=jobs,
                                                full=full))
            else:
                # a file judged here (no pool) tells its sessions as they are judged: one Inspect log of thousands of
                # samples is minutes of work that would otherwise show no count until it ends
                told = None if progress is None else (
                    lambda n, number=number, before=len(out): progress(number - 1, len(found), before + n))
                out.extend(next(judged) if judged is not None
                           else _audit_file(entry, policy, items, lone, keep_logs, full, jobs, told))
            if progress is not None:
                progress(number, len(found), len(out))
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return without_merged_files(out)


def without_merged_files(rows: list[AuditedSession]) -> list[AuditedSession]:
    """The rows but those of a file another row's session read whole (a subagent's trajectory file, judged as part
    of the trajectory that named it): one row per session. A row is left out only where a row of another file read
    it and it did not read that file back (files naming each other are each kept: none is lost to the other)."""
    read_by = {row.source: {_same_file_key(p) for p in row.merged} for row in rows if row.merged}
    if not read_by:
        return rows
    keys = {row.source: _same_file_key(row.source) for row in rows}

    def read_elsewhere(row: AuditedSession) -> bool:
        me = keys[row.source]
        mine = {_same_file_key(p) for p in row.merged}
        return any(me in theirs and keys[source] not in mine
                   for source, theirs in read_by.items() if keys.get(source) != me)
    return [row for row in rows if not read_elsewhere(row)]


def _audit_file(entry: Found, policy: Any, items: dict[str, SessionFacts], lone: SessionFacts | None,
                keep_logs: bool, full: bool = False, jobs: int = 1,
                judged: Callable[[int], None] | None = None) -> list[AuditedSession]:
    """Every session of one file (or Harbor trial folder) judged: `audit_path`'s unit of work (module level, so
    a worker process can run it). The command line's facts apply where the file holds one session only.

    The cyclic collector is paused for the whole file, as verdict._audit_folder pauses it for an attempt: sessions
    hold no cycles, and re-enabled between sessions it scanned every object of the session still held (a
    fifteenth of the CPU of a folder of the CLIs' files); at the end only the rows are left to it. `jobs` (only where
    no pool shares out the files: a worker cannot start workers) shares an Inspect log's samples among processes;
    `judged(n)` is told how many of the file's sessions are judged so far, as they are."""
    with collector_paused():
        try:
            if entry.fmt == "inspect" and jobs != 1:
                return _inspect_rows(entry, policy, items, lone, keep_logs, jobs, judged)
            return _judged_rows(entry, policy, items, lone, keep_logs, full, judged)
        except FactNotText as exc:  # a log's metadata (ATIF `extra`, a sample's metadata): the line names the file
            raise DataError(entry.path, None, str(exc)) from None


def _judged_rows(entry: Found, policy: Any, items: dict[str, SessionFacts], lone: SessionFacts | None,
                 keep_logs: bool, full: bool = False, judged: Callable[[int], None] | None = None) -> list[AuditedSession]:
    # a Claude Code or Codex file holds one session: the command line's facts are its own (as `flags` gives them)
    sessions = sessions_of(entry, reading_for(items, lone if entry.fmt in ("claude", "codex") else None, full))
    return _rows_of(sessions, policy, items, lone, keep_logs, judged)


def _rows_of(sessions: Iterator[ExternalSession], policy: Any, items: dict[str, SessionFacts],
             lone: SessionFacts | None, keep_logs: bool, judged: Callable[[int], None] | None = None) -> list[AuditedSession]:
    ahead = list(islice(sessions, 2))  # whether the file holds one session only; the rest are read as judged
    flags = lone if len(ahead) == 1 else None
    rows = []
    for session in chain(ahead, sessions):  # one session's events held at a time (an Inspect log's thousands)
        rows.append(_judged(session, policy, items, flags, keep_logs))
        if judged is not None:
            judged(len(rows))
    return rows


def _judged(session: ExternalSession, policy: Any, items: dict[str, SessionFacts], flags: SessionFacts | None,
            keep_logs: bool) -> AuditedSession:
    row = audit_session(session, policy, items, flags)
    if not keep_logs:
        row.log = None
    return AuditedSession(row, session.fmt, session.source, session.task_score, session.merged)


# where a process opens its own descriptors anew (Linux): a new open file description of the same file, with its own
# offset. Elsewhere (macOS's /dev/fd/N duplicates the descriptor, offset shared across the forked workers) one log's
# samples are judged in one process.
PROC_FD = Path("/proc/self/fd")


def _inspect_rows(entry: Found, policy: Any, items: dict[str, SessionFacts], lone: SessionFacts | None,
                  keep_logs: bool, jobs: int, judged: Callable[[int], None] | None = None) -> list[AuditedSession]:
    """An Inspect log's sessions judged with its samples shared among `workers(jobs, samples)` processes, in order.

    Why: one `.eval` of a real evaluation holds thousands of samples, and inspect_ai's reading of each is most of its
    audit (~3.5 ms of ~5 ms a sample). The log is opened and admitted once, here; each worker, forked while it is
    open, reads the same admitted file through that descriptor (`/proc/self/fd/N`: the file that was checked, even
    were its name pointed elsewhere since) in a span of samples of its own, and sends back its rows. A log read
    whole (`.json`, or entries not named as inspect_ai names them) or too small to share is judged here."""
    with opened_inspect_log(entry.path) as log:
        context = _inspect_context(log)
        count = workers(jobs, len(log.keys))
        stream = log.stream
        if stream is None or count <= 1 or len(log.keys) < 2 or not PROC_FD.is_dir():
            return _rows_of((_inspect_session(entry.path, sample, *context) for sample in log.samples),
                            policy, items, lone, keep_logs, judged)
        entries = stream.entries
        size = max(1, -(-len(entries) // (count * 4)))  # a few spans per worker: one slow span does not hold the rest
        spans = [entries[i:i + size] for i in range(0, len(entries), size)]
        rows: list[AuditedSession] = []
        pool = ProcessPoolExecutor(max_workers=min(count, len(spans)), mp_context=multiprocessing.get_context("fork"))
        try:
            for span_rows in pool.map(_judge_inspect_span, repeat(entry.path), repeat(stream.fd), repeat(stream.version),
                                      spans, repeat(context), repeat(policy), repeat(items), repeat(keep_logs)):
                rows.extend(span_rows)
                if judged is not None:
                    judged(len(rows))
        finally:
            pool.shutdown(cancel_futures=True)  # a span's error (one line) ends the log: the rest are not read
        return rows


def _judge_inspect_span(path: Path, fd: int, version: int, span: list[tuple[str, str, int]],
                        context: tuple[bool, bool, str], policy: Any, items: dict[str, SessionFacts],
                        keep_logs: bool) -> list[AuditedSession]:
    """A worker's share of `_inspect_rows`: its span of sample entries read from the admitted file it inherited."""
    with collector_paused(), open(PROC_FD / str(fd), "rb") as fh, zipfile.ZipFile(fh) as archive:
        try:
            return [_judged(_inspect_session(path, sample_alone(archive, path, name, (text, epoch), version), *context),
                            policy, items, None, keep_logs) for name, text, epoch in span]
        except FactNotText as exc:
            raise DataError(path, None, str(exc)) from None
