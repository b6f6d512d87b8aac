"""Claude Code's and Codex's own session files as sessions: a session file with its subagents' transcripts, a Codex
rollout with the rollouts of the subagents it started.

`~/.claude/projects/<project>/<session>.jsonl` (with `<session>/subagents/agent-*.jsonl`) and
`~/.codex/sessions/**/rollout-*.jsonl` (a subagent's rollout names its parent thread). Each file is read by its
candidate lines (`session_file_prefilter`, the default) or every line (`--full`), up to the session limits.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Callable, Iterator

from statebox.audits import log_files, log_formats, session_file_prefilter, session_limits
from statebox.audits.events import AttemptFacts, Prefilter, new_event, session_log
from statebox.audits.external_session import ExternalSession, SessionFacts, events_of, merge_facts
from statebox.audits.fastmatch import Literals
from statebox.audits.log_files import open_regular, read_within
from statebox.audits.log_formats import SUBAGENTS_DIR, Found, first_object
from statebox.audits.session_limits import cut_to_lines
from statebox.errors import UserError
from statebox.json_text import decoded_lines, json_value, line_loads
from statebox.schema import Event, EventKind
from statebox.sessions import EventDraft, claude_session, claude_stream, codex_jsonl, codex_rollout
from statebox.sessions.shapes import object_at
from statebox.userfiles import read_upto


def session_lines(path: Path) -> tuple[bytes, list[str]]:
    """A CLI's session file, up to SESSION_LINE_LIMIT lines (session_limits), and the notes it leaves when cut;
    one over MAX_LOG_BYTES is not read at all."""
    data, unread = read_within(path, log_files.MAX_LOG_BYTES)
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
    first = first_object(data)
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
    first = first_object(data)
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
            head = read_upto(handle, log_formats.HEAD_BYTES)  # the line is most often within it: the rest of the file is not read
            if b"\n" not in head and len(head) == log_formats.HEAD_BYTES:
                head += read_upto(handle, ROLLOUT_HEAD_BYTES - log_formats.HEAD_BYTES)
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
