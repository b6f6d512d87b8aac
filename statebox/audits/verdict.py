"""From findings to a verdict per attempt, and from verdicts to the scores people read.

Verdict: any `proof` or `high` finding -> `contaminated` (the agent reached for
the answer, or provably touched a decoy); only `medium`/`low` -> `suspicious`;
none -> `clean`. The policy maps verdicts to actions (`none | flag | void`): a
voided attempt's answer is scored as if it answered nothing.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any, Callable, Iterable

from statebox.attempt_folder import ATTEMPTS_DIR, ATTEMPT_FILE, EVENTS_FILE, VERDICT_FILE
from statebox.audits.events import AttemptFacts, AuditLog, Prefilter, load_attempt, load_session_file
from statebox.audits.honeytokens import (HONEYTOKENS_DIR, PLAN_FILE, DecoyEvidence, atime_findings, decoy_evidence,
                                         evidence_findings)
from statebox.audits.llm_pass import second_pass
from statebox.audits.rules import ALWAYS_PARSE, OUTPUT_TRIGGERS, run_rules, static_triggers
from statebox.audits.workers import workers
from statebox.collector import collector_paused
from statebox.errors import UserError
from statebox.replace_file import replace_text
from statebox.schema import Finding, Prediction, Verdict

_PREFILTER: Prefilter | None = None


def default_prefilter() -> Prefilter:
    """Compiled once per process: the static rule triggers (RE2) plus always-parsed lines."""
    global _PREFILTER
    if _PREFILTER is None:
        _PREFILTER = Prefilter(static_triggers(), ALWAYS_PARSE, OUTPUT_TRIGGERS)
    return _PREFILTER


def label_of(findings: Iterable[Finding]) -> str:
    severities = {f.severity for f in findings}
    if severities & {"proof", "high"}:
        return "contaminated"
    if severities:
        return "suspicious"
    return "clean"


def action_for(label: str, policy: Any = None) -> str:
    audit = getattr(policy, "audit", None)
    if label == "contaminated":
        return getattr(audit, "on_contaminated", "void") if audit else "void"
    if label == "suspicious":
        return getattr(audit, "on_suspicious", "flag") if audit else "flag"
    return "none"


def verdict_of(log: AuditLog, policy: Any = None, extra: list[Finding] | None = None) -> Verdict:
    return verdict_from(log.facts.attempt_id, run_rules(log) + list(extra or []), policy)


def verdict_from(attempt_id: str, findings: list[Finding], policy: Any = None) -> Verdict:
    """The verdict these findings make (`label_of`) and the policy's action for it."""
    label = label_of(findings)
    return Verdict(attempt_id=attempt_id, verdict=label, findings=findings, action=action_for(label, policy))


def _with_second_pass(verdict: Verdict, log: AuditLog, policy: Any, attempt_dir: Path) -> Verdict:
    """Policy switch `audit.llm_second_pass`: a model judge may raise a suspicious verdict (cached per attempt)."""
    if verdict.verdict != "suspicious" or not getattr(getattr(policy, "audit", None), "llm_second_pass", False):
        return verdict
    extra = second_pass(log, verdict.findings, policy, cache_dir=attempt_dir)
    if not extra:
        return verdict
    return verdict_from(verdict.attempt_id, verdict.findings + extra, policy)


def audit_log(log: AuditLog, policy: Any = None) -> Verdict:
    return verdict_of(log, policy)


def audit_attempt(attempt_dir: Path, policy: Any = None, *, fast: bool = True, write: bool = True) -> Verdict:
    """Audit one attempt folder and write its verdict.json (the session files are only read).

    The decoys' host evidence is the snapshot taken when the attempt ended
    (`honeytokens.decoy_evidence`), so auditing again later gives the same verdict
    whoever has read or copied the run folder since."""
    attempt_dir = Path(attempt_dir)
    if not attempt_dir.is_dir():
        raise UserError(f"{attempt_dir}: not an attempt folder")
    with collector_paused():  # as in _audit_folder
        log = load_attempt(attempt_dir, default_prefilter() if fast else None)
        verdict = _with_second_pass(verdict_of(log, policy, atime_findings(attempt_dir)), log, policy, attempt_dir)
    if write:
        write_verdict(attempt_dir, verdict)
    return verdict


def write_verdict(attempt_dir: Path, verdict: Verdict) -> None:
    """Replace the attempt's verdict.json in one rename, so a reader (the report, a resumed
    run) sees the old verdict or the new one, never half of one."""
    replace_text(attempt_dir / VERDICT_FILE, verdict.model_dump_json(indent=2) + "\n")


@dataclass
class AuditedAttempt:
    """One row of `statebox audit`: who, what, and the verdict."""

    attempt: str
    agent: str
    item: str
    verdict: Verdict
    log: AuditLog | None = None
    notes: list[str] = field(default_factory=list)  # what the audit could not judge and why (old decoy records)

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "agent": self.agent,
            "item": self.item,
            "verdict": self.verdict.verdict,
            "findings": [{"category": f.category, "severity": f.severity, "event": f.event, "quote": f.quote}
                         for f in self.verdict.findings],
        }


def attempt_dirs(run_dir: Path) -> list[Path]:
    """Attempt folders of a run (RUN_DIR/attempts/*), or the folder itself when it is one attempt."""
    run_dir = Path(run_dir)
    if (run_dir / ATTEMPT_FILE).exists() or (run_dir / EVENTS_FILE).exists():
        return [run_dir]
    base = run_dir / ATTEMPTS_DIR if (run_dir / ATTEMPTS_DIR).is_dir() else run_dir
    return sorted(p for p in base.iterdir() if p.is_dir() and ((p / ATTEMPT_FILE).exists() or (p / EVENTS_FILE).exists()))


def audit_run(run_dir: Path, policy: Any = None, *, write: bool = True, keep_logs: bool = False,
              jobs: int = 1, progress: Callable[[int, int], None] | None = None, full: bool = False) -> list[AuditedAttempt]:
    """Audit every attempt of a run (or one attempt folder); writes each verdict.json.

    `jobs` > 1 audits the attempt folders in that many worker processes (same rows, same order); `workers.AUTO`
    (0) as many as `workers.workers` gives for their count.
    `progress(done, total)` is told after each attempt. `full`: every line of every log is parsed (no prefilter):
    the reference reading the fast path is fuzzed against, for a run folder some other tool wrote."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: no such run folder or session file")
    dirs = attempt_dirs(run_dir)
    if not dirs:
        raise UserError(f"{run_dir}: no attempts found (expected RUN_DIR/attempts/<id>/ with events.jsonl or attempt.json)")
    jobs = workers(jobs, len(dirs))
    with ExitStack() as stack:
        if jobs > 1 and len(dirs) > 1 and not keep_logs:
            # attempts are independent (each reads and writes only its own folder): a process pool scales
            # the auditor over cores the way `rg` does over files; rows come back in folder order
            pool = stack.enter_context(ProcessPoolExecutor(max_workers=min(jobs, len(dirs))))
            judged = pool.map(_audit_folder, dirs, repeat(policy), repeat(write), repeat(False), repeat(full),
                              chunksize=max(1, len(dirs) // (jobs * 8)))
        else:
            judged = map(_audit_folder, dirs, repeat(policy), repeat(write), repeat(keep_logs), repeat(full))
        rows: list[AuditedAttempt] = []
        for row in judged:
            rows.append(row)
            if progress is not None:
                progress(len(rows), len(dirs))
    return rows


def _audit_folder(attempt_dir: Path, policy: Any, write: bool, keep_log: bool, full: bool = False) -> AuditedAttempt:
    """One row of `audit_run` (module level, so a worker process can run it).

    The cyclic collector is paused while one attempt is read and judged (its objects hold no cycles): with it
    running, a session of 16,000 actions cost twice as much per action as one of 300 (it re-scanned the
    session's events at each allocation burst)."""
    with collector_paused():
        log = load_attempt(attempt_dir, None if full else default_prefilter())
        evidence = _decoy_evidence(attempt_dir, log)
        verdict = _with_second_pass(verdict_of(log, policy, evidence_findings(evidence)), log, policy, attempt_dir)
    if write:
        write_verdict(attempt_dir, verdict)
    return AuditedAttempt(log.facts.attempt_id or attempt_dir.name, log.facts.agent, log.facts.item_id, verdict,
                          log if keep_log else None, notes=list(evidence.notes))


# The names `honeytokens.decoy_evidence` asks the attempt folder about (the snapshot lies inside the first), lowered.
_DECOY_RECORDS = frozenset((HONEYTOKENS_DIR.lower(), PLAN_FILE.lower()))


def _decoy_evidence(attempt_dir: Path, log: AuditLog) -> DecoyEvidence:
    """`decoy_evidence(attempt_dir)`, answered from the folder's listing where it holds no decoy record.

    Why: three `exists()` calls and five path joins per attempt cost a third of what its rules do. Exact:
    `decoy_evidence` finds nothing (an empty `DecoyEvidence`) unless `honeytokens/` or `plan.json` exists in
    the folder; the listing load_attempt made holds every name there, all ASCII (`_Listing.authoritative`),
    and a name equal to either but for case (which a case-insensitive file system would open) sends the
    question to the file system as before, as does a folder the listing does not answer for."""
    names = log.folder_names
    if names is not None and not any(name.lower() in _DECOY_RECORDS for name in names):
        return DecoyEvidence()
    return decoy_evidence(attempt_dir)


def audit_file(path: Path, facts: AttemptFacts | None = None, policy: Any = None, fmt: str | None = None) -> AuditedAttempt:
    """Audit a lone session file (secret facts from flags)."""
    log = load_session_file(Path(path), facts, fmt)
    verdict = verdict_of(log, policy)
    return AuditedAttempt(log.facts.attempt_id, log.facts.agent, log.facts.item_id, verdict, log)


# ---------------------------------------------------------------------------
# score views
# ---------------------------------------------------------------------------


@dataclass
class AdjustedViews:
    """Predictions for the three score views, and what the auditor found, for one set of attempts.

    - `all`: every attempt as answered;
    - `clean`: only attempts the auditor found clean;
    - `voided`: every attempt but those whose action is `void`: a voided attempt answers nothing,
      so its prediction is left out and each rule scores the query as a missing prediction (an
      abstention, never a right answer). Not the empty string: EOC-Bench's released parser maps ""
      to the most similar option, which can be the right one.
    Feed each list to `statebox.scoring.score_predictions` (with the items: `voided` is shorter).
    """

    all: list[Prediction] = field(default_factory=list)
    clean: list[Prediction] = field(default_factory=list)
    voided: list[Prediction] = field(default_factory=list)
    verdict_counts: dict[str, int] = field(default_factory=dict)
    category_counts: dict[str, int] = field(default_factory=dict)


def adjusted_views(rows: Iterable[Any], verdicts: dict[str, Verdict]) -> AdjustedViews:
    """Rows need `attempt_id`, `item_id`, `query_index`, `response` (attributes or dict keys).

    An attempt without a verdict counts as clean (nothing was found against it),
    and category counts are attempts per category, not findings.
    """
    views = AdjustedViews()
    verdict_counts: Counter[str] = Counter()
    category_counts: Counter[str] = Counter()
    for row in rows:
        get = (lambda k, d=None: row.get(k, d)) if isinstance(row, dict) else (lambda k, d=None: getattr(row, k, d))
        attempt_id = str(get("attempt_id", ""))
        verdict = verdicts.get(attempt_id)
        label = verdict.verdict if verdict else "clean"
        action = verdict.action if verdict else "none"
        verdict_counts[label] += 1
        for cat in sorted({f.category for f in (verdict.findings if verdict else [])}):
            category_counts[cat] += 1
        pred = Prediction(id=str(get("item_id", "")), query_index=get("query_index", None), response=str(get("response", "") or ""))
        views.all.append(pred)
        if label == "clean":
            views.clean.append(pred)
        if action != "void":
            views.voided.append(pred)
    views.verdict_counts = dict(verdict_counts)
    views.category_counts = dict(category_counts)
    return views
