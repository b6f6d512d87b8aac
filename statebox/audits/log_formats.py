"""Which harness wrote a file or folder, told by its name and first bytes, and every log under a folder.

`statebox audit PATH` takes an Inspect log, a Harbor job or trial folder (or one ATIF trajectory), Claude Code's or
Codex's own session files, a statebox run folder, or a folder of any of these (`--format` to say which). A head is a
fast yes, not a no: a JSON document whose head names no format is read whole (within its limit) and judged by its
shape. A folder is walked without following links, at most MAX_FILES files looked at, and what could have held a
session and was not read is named (`discover`'s `passed_over`).
"""

from __future__ import annotations

import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from statebox.attempt_folder import ATTEMPT_FILE, ATTEMPTS_DIR, EVENTS_FILE, RUN_CONFIG_FILE
from statebox.audits import session_limits
from statebox.audits.events import sniff_object
from statebox.audits.log_files import open_regular, read_within
from statebox.errors import UserError
from statebox.json_text import json_value
from statebox.sessions import atif_trajectory, claude_session, codex_rollout

EXTERNAL_FORMATS = ("inspect", "harbor", "claude", "codex", "statebox")
MAX_FILES = 200_000  # files looked at in one folder walk
HEAD_BYTES = 64 * 1024  # what is read of a file to tell its format
HARBOR_TRAJECTORY = "trajectory.json"  # a Harbor trial's session file
_ATIF_HEAD = re.compile(rb'"schema_version"\s*:\s*"ATIF')
_INSPECT_HEAD = re.compile(rb'"eval"\s*:\s*\{')
_ROLLOUT_HEAD = re.compile(rb'^\{[^\n]{0,200}"type"\s*:\s*"(?:session_meta|response_item|event_msg|turn_context)"')
_CLAUDE_HEAD = re.compile(rb'"(?:sessionId|parentUuid)"\s*:')

# Claude Code 2.x writes what each subagent (its `Agent` / `Task` tool) did to a file of its own beside the session's:
# `<project>/<session>/subagents/agent-<id>.jsonl` (with an `agent-<id>.meta.json`), every line `isSidechain`.
SUBAGENTS_DIR = "subagents"


def _head(path: Path) -> bytes:
    try:
        with open_regular(path, cap=sys.maxsize) as fh:  # its size is judged where it is read (a file over the cap
            # was taken for none of ours here, and left out of a folder's audit without a word)
            return fh.read(HEAD_BYTES)
    except UserError:
        return b""


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
        first = first_object(head)
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


def first_object(head: bytes) -> dict[str, Any] | None:
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
