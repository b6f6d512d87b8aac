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

This module judges the sessions; finding and reading them are each a module of their own: `log_files` (a user's
file opened as hostile), `log_formats` (which format, every log under a folder), `external_session` (what every
reader gives, and `--items`), and the readers `inspect_logs`, `harbor_trials` and `cli_session_files`.
"""

from __future__ import annotations

import multiprocessing
import zipfile
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import chain, islice, repeat
from pathlib import Path
from typing import Any, Callable, Iterator, get_args

from statebox.audits.cli_session_files import FULL, Reading, claude_sessions, codex_sessions, rollout_families
from statebox.audits.events import FactNotText
from statebox.audits.external_session import ExternalSession, SessionFacts, merge_facts
from statebox.audits.harbor_trials import harbor_sessions, same_file_key
from statebox.audits.inspect_logs import (
    inspect_context,
    inspect_session,
    inspect_sessions,
    opened_inspect_log,
    sample_alone,
)
from statebox.audits.log_formats import Found, discover
from statebox.audits.rules import run_rules
from statebox.audits.verdict import AuditedAttempt, audit_run, default_prefilter, verdict_from
from statebox.audits.workers import workers
from statebox.collector import collector_paused
from statebox.errors import DataError, UserError
from statebox.schema import Finding, FindingCategory, Severity

CARRIED_PREFIX = "recorded by the run"


# ---------------------------------------------------------------------------
# auditing
# ---------------------------------------------------------------------------



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
    read_by = {row.source: {same_file_key(p) for p in row.merged} for row in rows if row.merged}
    if not read_by:
        return rows
    keys = {row.source: same_file_key(row.source) for row in rows}

    def read_elsewhere(row: AuditedSession) -> bool:
        me = keys[row.source]
        mine = {same_file_key(p) for p in row.merged}
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
        context = inspect_context(log)
        count = workers(jobs, len(log.keys))
        stream = log.stream
        if stream is None or count <= 1 or len(log.keys) < 2 or not PROC_FD.is_dir():
            return _rows_of((inspect_session(entry.path, sample, *context) for sample in log.samples),
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
            return [_judged(inspect_session(path, sample_alone(archive, path, name, (text, epoch), version), *context),
                            policy, items, None, keep_logs) for name, text, epoch in span]
        except FactNotText as exc:
            raise DataError(path, None, str(exc)) from None
