"""`statebox audit LOG --write-scores OUT`: a copy of an Inspect log with the audit's verdict as a score per sample.

Each sample scored gets a `statebox_audit` score (value: the verdict; explanation: each finding with its event;
metadata: verdict, action, findings) beside the task's own scores, and the log's results a matching `EvalScore`
(the share of scored samples per verdict), so `inspect view` shows the verdict beside the task score.

Why the copy is streamed: a real evaluation's log is hundreds of MB to GBs, and inspect_ai's `read_eval_log` builds
every sample before it returns (a 126.5 MB log held ~400-500 MB). An `.eval` copy is read a sample at a time
(`inspect_logs.opened_inspect_log`, the audit's own reader, each sample through inspect_ai's public reader) and
written with inspect_ai's own `.eval` recorder the way its `write_eval_log` writes a log (`log_init`, `log_start`,
each sample condensed and logged, `log_finish` with the header's status, stats, results, reductions, error and
updates), its buffered samples put into the zip every `BATCH`, so memory holds `BATCH` samples and the recorder's
small per-sample summaries. The recorder is not among `inspect_ai.log`'s public names (as for `statebox export`:
the version range in pyproject and the tests, which compare a streamed copy with the whole-log write, guard it).
A `.json` copy is one JSON document, so it is built whole and written by `write_eval_log`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from statebox.audits.external import AuditedSession
from statebox.audits.findings_shown import shown_indexes
from statebox.audits.inspect_logs import AUDIT_SCORER, inspect_sample_name, opened_inspect_log, read_inspect_log
from statebox.audits.log_formats import file_format
from statebox.audits.verdict import AuditedAttempt
from statebox.errors import UserError
from statebox.replace_file import inspect_log_holding, refuse_unless_replaceable, replacing_by_name

if TYPE_CHECKING:  # inspect_ai is heavy (~1 s to import): loaded only when a copy is written
    from inspect_ai.log import EvalResults, EvalSample

BATCH = 256  # samples held before the recorder puts them into the .eval zip
Copied = Callable[[int, int], None]  # (samples copied, samples in the log): the copy's progress
VERDICTS = ("clean", "suspicious", "contaminated")


def check_scores_out(target: Path, out: Path) -> None:
    """Refuse, before any work, a `--write-scores` that could not give a copy of one Inspect log."""
    if target.is_dir() or file_format(target) != "inspect":
        raise UserError(f"{target}: --write-scores needs one Inspect log (.eval or .json) as PATH")
    if out.suffix not in (".eval", ".json"):
        raise UserError(f"{out}: --write-scores writes an Inspect log: give a name ending in .eval or .json")
    if out.exists() and (out.is_dir() or out.resolve() == target.resolve()):
        raise UserError(f"{out}: --write-scores writes a copy; give a new file, not the log itself or a folder")
    if not out.parent.is_dir():
        raise UserError(f"{out}: folder {out.parent} does not exist")
    refuse_unless_replaceable(out, inspect_log_holding(out))  # before the audit; the write asks again


def write_scores(target: Path, rows: list[AuditedSession], out: Path, progress: Copied | None = None) -> int:
    """Write the copy (`.eval`: streamed; `.json`: whole); returns the samples scored. `progress` hears how many
    samples are copied (a 3,000-sample log takes ~20 s to copy, after its audit)."""
    import asyncio  # here, not at the top: imported by every `statebox audit`, asyncio (and the ssl it loads) went
    # with a run folder's `--jobs 2` audit taking 0.55-0.57 s of CPU per 100 MB instead of 0.48-0.52 (six perf runs
    # each way, perf/audit_throughput.py; one process: within the noise)

    by_name = {r.row.attempt: r.row for r in rows}
    with replacing_by_name(out, inspect_log_holding(out)) as tmp:
        if out.suffix == ".eval":
            return asyncio.run(_stream_copy(target, by_name, tmp, progress or _unheard))
        return _whole_copy(target, by_name, tmp, progress or _unheard)


def _unheard(done: int, total: int) -> None:
    return None


def _whole_copy(target: Path, by_name: dict[str, AuditedAttempt], tmp: str, progress: Copied) -> int:
    from inspect_ai.log import write_eval_log

    log = read_inspect_log(target)
    samples = list(log.samples or [])
    progress(0, len(samples))
    unique = len({str(s.id) for s in samples}) == len(samples)
    counts = Counter(_score(sample, by_name.get(inspect_sample_name(sample, unique))) for sample in samples)
    log.results = _results(log.results, counts, len(samples))
    write_eval_log(log, tmp, format="json")
    progress(len(samples), len(samples))
    return _scored(counts)


async def _stream_copy(target: Path, by_name: dict[str, AuditedAttempt], tmp: str, progress: Copied) -> int:
    from inspect_ai.log._condense import condense_sample  # what write_eval_log does to each sample it writes
    from inspect_ai.log._recorders.eval import EvalRecorder  # inspect's streaming .eval writer (see the docstring)

    with opened_inspect_log(target) as log:
        header = log.header
        unique = len({key for key, _ in log.keys}) == len(log.keys)
        recorder = EvalRecorder(str(Path(tmp).parent))
        await recorder.log_init(header.eval, tmp, clean=True)
        await recorder.log_start(header.eval, header.plan)
        zip_log = recorder.data[recorder._log_file_key(header.eval)]  # its zip in progress (see statebox export)
        counts: Counter[str] = Counter()
        progress(0, len(log.keys))
        for n, sample in enumerate(log.samples, 1):
            counts[_score(sample, by_name.get(inspect_sample_name(sample, unique)))] += 1
            await recorder.log_sample(header.eval, condense_sample(sample))
            if n % BATCH == 0:
                await zip_log.write_buffered_samples()
            progress(n, len(log.keys))
        await recorder.log_finish(header.eval, header.status, header.stats,
                                  _results(header.results, counts, len(log.keys)), header.reductions, header.error,
                                  invalidated=header.invalidated, log_updates=header.log_updates,
                                  config_updates=header.config_updates)
    return _scored(counts)


def _score(sample: "EvalSample", row: AuditedAttempt | None) -> str:
    """Put the audit's score on `sample` (in place); returns its verdict, or "" for a sample the audit has no row for."""
    from inspect_ai.scorer import Score

    if row is None:
        return ""
    v = row.verdict
    findings = [f.model_dump() for f in v.findings]
    sample.scores = {**(sample.scores or {}), AUDIT_SCORER: Score(
        value=v.verdict, explanation=explanation(v.verdict, v.action, findings),
        metadata={"verdict": v.verdict, "action": v.action, "findings": findings})}
    return v.verdict


def _scored(counts: Counter[str]) -> int:
    return sum(counts[v] for v in VERDICTS)


def _results(results: "EvalResults | None", counts: Counter[str], total: int) -> "EvalResults | None":
    """The log's results with the audit's entry (the share of scored samples per verdict) in place of any earlier one."""
    from inspect_ai.log import EvalMetric, EvalResults, EvalScore

    scored = _scored(counts)
    if not scored:
        return results
    if results is None:
        results = EvalResults(total_samples=total, completed_samples=total)
    results.scores = [s for s in results.scores if s.name != AUDIT_SCORER] + [EvalScore(
        name=AUDIT_SCORER, scorer=AUDIT_SCORER, scored_samples=scored,
        metrics={k: EvalMetric(name=k, value=counts[k] / scored) for k in VERDICTS})]
    return results


def explanation(verdict: str, action: str, findings: Iterable[dict[str, Any]]) -> str:
    """The verdict as one paragraph: label, action, each finding with its event."""
    findings = list(findings)
    head = f"statebox audit: {verdict} (action: {action})"
    if not findings:
        return head + "; no findings"
    lines = [head + ";"]
    shown = shown_indexes([(str(f.get("category")), str(f.get("severity"))) for f in findings])
    for f in (findings[i] for i in shown):
        where = f" [event {f['event']}]" if f.get("event") is not None else ""
        lines.append(f"- {f.get('category')} / {f.get('severity')} ({f.get('rule')}){where}: {str(f.get('quote') or '')[:200]!r}")
    if len(findings) > len(shown):  # the score's metadata keeps them all (findings_shown says why)
        lines.append(f"- and {len(findings) - len(shown):,} more finding(s), less severe or later")
    return "\n".join(lines)


__all__ = ["BATCH", "Copied", "check_scores_out", "explanation", "write_scores"]
