"""`statebox audit PATH [--json] [--html OUT.html]`: the contamination auditor from the command line.

PATH is a statebox run folder, attempt folder or session file as always, or another harness's run
(issue 26): an Inspect AI log, a Harbor job / trial folder or ATIF trajectory, Claude Code's or
Codex's own session files, or a folder of any of these; `audits/log_formats.py` detects the format
(or takes `--format`), takes per-session facts from the log and `--items FILE`, and writes nothing
but what `--html` / `--write-scores` ask for.

Auditing a run folder (without `--no-write`) writes each attempt's verdict.json and the same
verdict into the run's result store (results.sqlite, `ResultStore.update_verdict`), under the
run folder's lock: the report reads the store, so the report and `statebox audit` never show
two verdicts for one attempt. Notes on what could not be judged (decoys of an attempt folder
from before decoy snapshots) go to stderr, one line each, never into `--json`'s output.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from statebox.attempt_folder import ATTEMPTS_DIR, RUN_CONFIG_FILE
from statebox.audits import external, external_session, inspect_logs, inspect_scores, log_formats
from statebox.audits.audit_report import write_audit_report
from statebox.audits.events import FORMATS as SESSION_FORMATS, AttemptFacts
from statebox.audits.verdict import AuditedAttempt, audit_file, audit_run
from statebox.audits.workers import AUTO, MIN_PER_WORKER
from statebox.errors import UserError
from statebox.harness.lock import hold_run_lock
from statebox.harness.store import RESULTS_FILE, ResultStore
from statebox.report.visible_text import visible
from statebox.policies import load_policy
from statebox.progress import ProgressDisplay
from statebox.replace_file import HTML_PAGE, refuse_unless_replaceable


def register(app: typer.Typer) -> None:
    @app.command("audit")
    def audit(
        target: Path = typer.Argument(..., help="A run folder (RUN_DIR/attempts/*), attempt folder or session file; an Inspect "
                                      "log, Harbor job/trial, Claude Code / Codex session file, or a folder of them."),
        as_json: bool = typer.Option(False, "--json", help='Print {"attempts": [{attempt, agent, item, verdict, findings}]}.'),
        fmt: Optional[str] = typer.Option(None, "--format", help="inspect|harbor|claude|codex|statebox, or a lone session "
                                                                 "file's events|gateway|text (default: detect)."),
        policy_name: str = typer.Option("default", "--policy", help="Policy whose audit actions apply (flag/void)."),
        original_name: Optional[str] = typer.Option(None, "--original-name", help="Session file: the original video file name."),
        item_id: Optional[str] = typer.Option(None, "--item-id", help="Session file: the benchmark item id."),
        question: Optional[str] = typer.Option(None, "--question", help="Session file: the question (to spot searches for it)."),
        honeytoken_value: Optional[List[str]] = typer.Option(None, "--honeytoken-value", help="Session file: a canary value (repeatable)."),
        honeytoken_path: Optional[List[str]] = typer.Option(None, "--honeytoken-path", help="Session file: a decoy path (repeatable)."),
        no_write: bool = typer.Option(False, "--no-write", help="Do not write verdict.json into attempt folders."),
        jobs: int = typer.Option(AUTO, "--jobs", "-j", min=0, max=256, help="Audit in N processes: a run's attempt folders, "
                                 f"or the files of a folder of other harnesses' logs. 0 (the default): one per core, once "
                                 f"there are {MIN_PER_WORKER} folders or files for each; 1: one process."),
        items_file: Optional[Path] = typer.Option(None, "--items", help="Other harnesses' logs: JSONL of per-session facts "
                                                  "({session|sample|id, question, original_name, item_id})."),
        html_out: Optional[Path] = typer.Option(None, "--html", help="Also write an HTML audit report to this file."),
        scores_out: Optional[Path] = typer.Option(None, "--write-scores", help="Inspect log: write a copy with a "
                                                  "statebox_audit score per sample to this .eval/.json file."),
        full: bool = typer.Option(False, "--full", help="Parse every line of every log (no prefilter), the reference "
                                  "reading; for run folders another tool wrote. Several times slower."),
        every_row: bool = typer.Option(False, "--all", help="List every attempt in the table, the clean ones too "
                                       "(default: the flagged ones and a count of the rest; --json always lists every one)."),
    ) -> None:
        """Check sessions for the seven contamination categories and honeytokens (a session past the audit's limits is flagged); write verdicts."""
        policy = load_policy(policy_name)
        if not target.exists():
            raise UserError(f"{target}: no such run folder, attempt folder or session file")
        if fmt is not None and fmt not in log_formats.EXTERNAL_FORMATS + SESSION_FORMATS:
            raise UserError(f"unknown format {fmt!r} (known: {', '.join(log_formats.EXTERNAL_FORMATS + SESSION_FORMATS)})")
        flags = dict(original_name=original_name, item_id=item_id, question=question,
                     honeytoken_value=honeytoken_value, honeytoken_path=honeytoken_path)
        kind = _kind_of(target, fmt)
        if kind != "other" and (items_file is not None or scores_out is not None):
            raise UserError("--items and --write-scores are for other harnesses' logs (Inspect, Harbor, Claude Code, Codex)")
        if html_out is not None and (html_out.is_dir() or not html_out.parent.is_dir()):
            raise UserError(f"{html_out}: --html needs a file name in an existing folder")
        if html_out is not None:  # a device, FIFO, a link to one, a file that is no page: refused now, not after
            refuse_unless_replaceable(html_out, HTML_PAGE)
        keep_logs = html_out is not None  # the page shows the event behind each finding
        if kind == "other":  # another harness's run (or a folder of them): read-only
            with _progress() as display:
                display.add("files", total=None)
                rows, sessions = _audit_other(target, policy, fmt, items_file, scores_out, flags, keep_logs, jobs, full,
                                              lambda done, total, judged: display.update(
                                                  "files", done=done, total=total, note=f"{judged} sessions judged"),
                                              _copy_shown(display))
        elif target.is_dir() and no_write:
            with _progress() as display:
                display.add("attempt folders", total=None)
                rows = audit_run(target, policy, write=False, keep_logs=keep_logs, jobs=jobs, full=full,
                                 progress=lambda done, total: display.update("attempt folders", done=done, total=total))
        elif target.is_dir():
            # verdict.json is also the running run's to write: take the run folder's lock, so an
            # audit under another policy cannot overwrite verdicts while the run writes them.
            run_folder = _run_folder_of(target)
            with hold_run_lock(run_folder, role="audit"), _progress() as display:
                display.add("attempt folders", total=None)
                rows = audit_run(target, policy, write=True, keep_logs=keep_logs, jobs=jobs, full=full,
                                 progress=lambda done, total: display.update("attempt folders", done=done, total=total))
                _record_in_store(run_folder, rows)
        else:
            facts = AttemptFacts(
                attempt_id=target.stem,
                item_id=item_id or "",
                original_name=original_name or "",
                original_stem=Path(original_name).stem if original_name else "",
                question=question or "",
                honeytoken_values=list(honeytoken_value or []),
                honeytoken_paths=list(honeytoken_path or []),
            )
            rows = [audit_file(target, facts, policy, fmt)]
        if kind != "other":
            sessions = [external.AuditedSession(r, "statebox" if target.is_dir() else "session file", target) for r in rows]
        if html_out is not None:
            write_audit_report(html_out, sessions, title=f"statebox audit of {target.name}")
        for r in rows:
            for note in r.notes:
                typer.echo(f"note: {r.attempt}: {note}", err=True)
        if as_json:
            typer.echo(json.dumps({"attempts": [r.to_json() for r in rows]}))
            return
        _print_table(rows, every_row, "session" if kind == "other" else "attempt")


def _kind_of(target: Path, fmt: Optional[str]) -> str:
    """`statebox`: a run or attempt folder (verdicts written as always); `file`: a lone session file in a
    format statebox always read (events, stream-json, exec JSONL, gateway, text); `other`: the rest."""
    if fmt in SESSION_FORMATS and fmt not in ("claude", "codex"):
        return "file"
    if target.is_dir():
        return "statebox" if fmt in (None, "statebox") and log_formats.detect(target) == "statebox" else "other"
    found = log_formats.file_format(target)
    if found is None and fmt in (None, "claude", "codex"):
        return "file"
    if found is None or (fmt is not None and fmt != found):
        raise UserError(f"{target}: not {'a' if fmt != 'inspect' else 'an'} {fmt} log" + (f" (it reads as {found})" if found else ""))
    return "other"


def _progress() -> ProgressDisplay:
    """The audit's progress on stderr: a bar on a terminal (gone when done), else a line every 10 s while it
    lasts (an audit of a few sessions prints nothing more than its verdicts)."""
    columns = [TextColumn("[bold]audit[/] {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    return ProgressDisplay("audit", Console(stderr=True), columns, quiet_if_quick=True)


def _copy_shown(display: ProgressDisplay) -> inspect_scores.Copied:
    """The `--write-scores` copy's progress as a task of its own, shown from the copy's start."""
    def copied(done: int, total: int) -> None:
        if done == 0:
            display.add("samples copied", total=total)
        display.update("samples copied", done=done, total=total)

    return copied


def _audit_other(target: Path, policy, fmt: Optional[str], items_file: Optional[Path], scores_out: Optional[Path],
                 flags: dict, keep_logs: bool, jobs: int, full: bool, progress: external.Progress,
                 copied: inspect_scores.Copied) -> tuple[list[AuditedAttempt], list[external.AuditedSession]]:
    """Another harness's run: bad flags refused before any work, then every session judged, nothing written
    but the `--write-scores` copy."""
    if scores_out is not None:
        inspect_scores.check_scores_out(target, scores_out)
    items = external_session.read_items(items_file) if items_file is not None else {}
    given = external_session.SessionFacts(
        id="flags", question=flags["question"] or "", original_name=flags["original_name"] or "",
        item_id=flags["item_id"] or "", honeytoken_values=list(flags["honeytoken_value"] or []),
        honeytoken_paths=list(flags["honeytoken_path"] or [])) if any(flags.values()) else None
    passed_over: list[str] = []
    sessions = external.audit_path(target, policy, fmt=fmt, items=items, flags=given, keep_logs=keep_logs, jobs=jobs,
                                   progress=progress, passed_over=passed_over, full=full)
    for what in passed_over:
        typer.echo(f"note: not read: {what}", err=True)
    if scores_out is not None:
        n = inspect_scores.write_scores(target, sessions, scores_out, copied)
        typer.echo(f"note: {n} samples scored as {inspect_logs.AUDIT_SCORER} in {scores_out}", err=True)
    return [s.row for s in sessions], sessions


def _record_in_store(run_folder: Path, rows: list[AuditedAttempt]) -> None:
    """The verdicts just written into verdict.json, also in the run's store (when it has one):
    the report shows the store's, and must show what the audit says."""
    if not (run_folder / RESULTS_FILE).is_file():
        return
    store = ResultStore(run_folder)
    try:
        for r in rows:
            store.update_verdict(r.attempt, r.verdict.verdict, r.verdict.action, [f.model_dump() for f in r.verdict.findings])
    finally:
        store.close()


def _run_folder_of(target: Path) -> Path:
    """The run folder whose lock guards TARGET: RUN_DIR itself, or RUN_DIR for RUN_DIR/attempts
    and RUN_DIR/attempts/<id>."""
    if target.name == ATTEMPTS_DIR and (target.parent / RUN_CONFIG_FILE).exists():
        return target.parent
    if target.parent.name == ATTEMPTS_DIR and not (target / ATTEMPTS_DIR).is_dir():
        return target.parent.parent
    return target


def _print_table(rows, every_row: bool, noun: str) -> None:
    """The flagged attempts (`noun`: other harnesses' rows are sessions) as a table (every one with `--all`), then the
    counts. Every string from the session (quotes, item ids, attempt and file names) is plain text: no rich markup
    read from it, hidden characters (bidi controls, zero-width characters, terminal escapes) spelt <U+XXXX>
    (report/visible_text.py).

    Why the clean ones are counted, not listed: a run's audit is mostly clean attempts, and a row of "clean, -" per
    attempt buried the few that matter; rich also lays out a table in ~0.7 ms a row, so listing 281 clean attempts
    cost 0.2-0.4 s, half of the audit's own CPU (a real evaluation's thousands: seconds), for rows nobody reads."""
    console = Console()
    colour = {"clean": "green", "suspicious": "yellow", "contaminated": "red"}
    listed = rows if every_row else [r for r in rows if r.verdict.verdict != "clean"]
    table = Table(title="contamination audit", show_lines=False)
    for col in ("attempt", "agent", "item", "verdict", "action", "findings"):
        table.add_column(col, overflow="fold")
    for r in listed:
        v = r.verdict
        findings = Text()
        for k, f in enumerate(v.findings[:6]):
            if k:
                findings.append("\n")
            findings.append(_plain(f.category), style="bold")
            findings.append(f" ({_plain(f.severity)}, event {f.event}): {_plain(f.quote[:90])}")
        if len(v.findings) > 6:
            findings.append(f"\n... {len(v.findings) - 6} more")
        table.add_row(Text(_plain(r.attempt)), Text(_plain(r.agent)), Text(_plain(r.item)),
                      Text(v.verdict, style=colour[v.verdict]), v.action, findings if v.findings else "-")
    if listed:
        console.print(table)
    unlisted = len(rows) - len(listed)
    if unlisted:
        console.print(Text(f"{unlisted} clean {noun}{'s' if unlisted != 1 else ''} not listed (--all lists them)"))
    counts = Counter(r.verdict.verdict for r in rows)
    cats = Counter(c for r in rows for c in {f.category for f in r.verdict.findings})
    console.print(Text(", ".join(f"{k}: {counts.get(k, 0)}" for k in ("clean", "suspicious", "contaminated"))
                       + ("  |  " + ", ".join(f"{_plain(k)} {n}" for k, n in sorted(cats.items())) if cats else "")))


def _plain(text: object) -> str:
    return visible(str(text))
