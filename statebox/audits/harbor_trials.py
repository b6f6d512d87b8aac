"""Harbor's runs as sessions: a job or trial folder, or one ATIF `trajectory.json`, with its subagents' trajectories.

A trial's session is its `agent/trajectory.json` (ATIF, `sessions/atif_trajectory.py`); subagent trajectories it
embeds or references are read into it (one session, one row); the trial's `result.json` gives beside facts only.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from pydantic import ValidationError

from statebox.audits import external_session, session_limits
from statebox.audits.events import AttemptFacts, session_log
from statebox.audits.external_session import ExternalSession, events_of
from statebox.audits.log_files import read_capped, read_within
from statebox.audits.log_formats import discover
from statebox.audits.session_limits import past_steps
from statebox.errors import DataError, UserError
from statebox.json_text import json_value
from statebox.schema import Event
from statebox.sessions import atif_trajectory
from statebox.sessions.shapes import list_of


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
    seen = {same_file_key(file)}
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
            key = same_file_key(target)
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


def same_file_key(path: Path) -> tuple[int, int] | str:
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
        value = json_value(read_capped(path, external_session.MAX_ITEMS_BYTES))
    except (UserError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
