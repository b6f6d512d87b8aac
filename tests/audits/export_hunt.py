"""The export hunt: the literal hunt's texts in a run folder's places, the attempt exported as `statebox export` writes it
(an Inspect log, JSON and `.eval`, and ATIF trajectories), and each export audited as `statebox audit` reads it; a label
other than the run folder's own, or a finding of the run folder's (its category and severity, counted) the export's
audit lacks, is a hole.

Why: issue 26 promises that auditing an export gives the run folder's verdicts, and someone handed an export has nothing
else to audit. An export holds the attempt's events.jsonl as a conversation, not the gateway log, the decoys' records
or the secret facts, so whatever the run folder's verdict rests on beyond that (a command the gateway alone witnessed,
an output cut at the export's cap) must come through as a finding the export recorded (`external.carried_findings`).
Its first run (2026-11-30) found exactly that: a cheat the gateway log alone held (the agent had left it out of
events.jsonl) was contaminated in the run folder and clean in every export.

The attempts are exported by the writers' own sample and trajectory builders (`build_sample`, `build_trajectory`) from
a row holding the verdict `audit_attempt` wrote, as `statebox export` builds them from the run's stored row; the
run's other facts (scores, tokens, the item) do not reach the audit.

`test_export_hunt.py` runs it in CI; `python tests/audits/export_hunt.py` runs every literal in every run-folder place
and prints what differs.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import literal_hunt  # noqa: E402

from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSpec, write_eval_log  # noqa: E402

from statebox import __version__  # noqa: E402
from statebox.audits.external import audit_path  # noqa: E402
from statebox.audits.verdict import audit_attempt  # noqa: E402
from statebox.json_text import utf8_json  # noqa: E402
from statebox.report.export.atif import TRAJECTORY_PATH, build_trajectory  # noqa: E402
from statebox.report.export.inspect_log import build_sample  # noqa: E402
from statebox.report.export.records import AttemptRecord  # noqa: E402
from statebox.schema import Verdict  # noqa: E402

BATCH = literal_hunt.BATCH
EXPORTS = ("inspect.json", "inspect.eval", "atif")
Judged = tuple[str, list[tuple[str, str]]]  # (label, every finding's (category, severity), sorted)


def judged(verdict: Verdict) -> Judged:
    """Each finding counted: a text whose finding an export lost shows even where another text of its batch makes one
    of the same category and severity."""
    return verdict.verdict, sorted((f.category, f.severity) for f in verdict.findings)


def _row(attempt_id: str, verdict: Verdict) -> SimpleNamespace:
    """The stored row `RunReader.records` would give for the attempt: the verdict and findings as the run wrote them."""
    return SimpleNamespace(
        findings=[f.model_dump(mode="json") for f in verdict.findings], verdict=verdict.verdict, action=verdict.action,
        attempt_id=attempt_id, item_id="q517", dataset="suite", bench="suite", agent="claude-code", run_id="hunt",
        query_index=None, epoch=0, status="ok", reason="", input_tokens=0, output_tokens=0, cost_usd=0.0,
        frames_decoded=0, frames_model=0, retries=0, metrics={}, response="4", finished_at=1_800_000_000.0, duration_s=1.0)


def write_exports(folders: list[Path], out: Path, as_export: bool = True) -> dict[str, Judged]:
    """Audit each attempt folder as the run did (its verdict.json written), export them all into `out` (EXPORTS), and
    return each attempt's verdict from its folder. `as_export=False`: the Inspect logs name another task and no
    statebox package, as a log some other harness wrote with the same samples would."""
    samples, own = [], {}
    atif = out / "atif"
    for folder in folders:
        verdict = audit_attempt(folder, write=True)
        own[folder.name] = judged(verdict)
        record = AttemptRecord(row=_row(folder.name, verdict), item=None, attempt_dir=folder)
        samples.append(build_sample(record, "anthropic/claude-opus-4-7"))
        path = atif / folder.name / TRAJECTORY_PATH
        path.parent.mkdir(parents=True)
        path.write_bytes(utf8_json(build_trajectory(record, "claude-opus-4-7").model_dump(mode="json", exclude_none=True), indent=2) + b"\n")
    log = EvalLog(eval=EvalSpec(created="2027-01-15T08:00:00+00:00", task="statebox" if as_export else "video_qa",
                                dataset=EvalDataset(), model="statebox/claude-code", config=EvalConfig(),
                                packages={"statebox": __version__} if as_export else {}),
                  status="success", samples=samples)
    for name in EXPORTS[:2]:
        write_eval_log(log, str(out / name), format=name.rsplit(".", 1)[1])  # type: ignore[arg-type]
    return own


def lost(own: Judged, theirs: Judged | None) -> bool:
    """Whether the export's audit gave another label, or lacks a finding the run folder's has (counted: each one the
    run found must come back). A finding the export has beyond them is no loss: an export lacks the decoys' facts, so
    an access the run filed as a decoy's (`honeytoken`, carried) is also filed by what it is otherwise (an `exec` of a
    path outside the workspace: `filesystem_walk`)."""
    return theirs is None or theirs[0] != own[0] or bool(Counter(own[1]) - Counter(theirs[1]))


def audited(export: Path) -> dict[str, Judged]:
    return {row.row.attempt: judged(row.row.verdict) for row in audit_path(export, None)}


def differences(texts: list[str], places: tuple[str, ...] | None = None) -> list[tuple[str, str, str, Judged, Judged | None]]:
    """(place, export, text, the run folder's verdict, the export's) wherever they differ: every batch of texts is one
    attempt per place, all of a place's attempts one export; a batch that differs is named by its texts."""
    out: list[tuple[str, str, str, Judged, Judged | None]] = []
    root = Path(tempfile.mkdtemp(prefix="export-hunt-"))
    try:
        for place in places or tuple(literal_hunt.RUN_PLACES):
            batches = [texts[at:at + BATCH] for at in range(0, len(texts), BATCH)]
            base = root / place
            # one attempt folder per batch, each named as a run names its attempts
            folders = [literal_hunt.run_session(base / "attempts", place, batch, name=f"attempt{n:04d}")
                       for n, batch in enumerate(batches)]
            own = write_exports(folders, base)
            for export in EXPORTS:
                theirs = audited(base / export)
                for n, folder in enumerate(folders):
                    if lost(own[folder.name], theirs.get(folder.name)):
                        out.append((place, export, " | ".join(batches[n]), own[folder.name], theirs.get(folder.name)))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def _main() -> None:
    from multiprocessing import Pool

    literals = literal_hunt.test_suite_literals()
    batches = [literals[at:at + BATCH * 8] for at in range(0, len(literals), BATCH * 8)]
    with Pool() as pool:
        found = [row for rows in pool.map(differences, batches) for row in rows]
    for place, export, text, own, theirs in found:
        print(f"{place} -> {export}: {text[:160]!r}\n  run folder {own}\n  export     {theirs}")
    print(f"{len(found)} differences over {len(literals)} literals")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    _main()
