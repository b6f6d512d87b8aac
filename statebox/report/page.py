"""The run report: a picture first, then the numbers, then every attempt on demand.

Why this shape: people would rather look than read. The first screen answers "who is
best, by how much, and was it clean": a heatmap of agents x datasets (score, clean-only
value, voided count), each agent against the best chance/prior baseline with CIs, cost
against score, and the auditor's findings by category (inline SVG, works offline). Below
are the leaderboard and breakdowns (sortable tables), count confusion matrices and
per-query-time curves (SVG too), and a filterable, searchable attempt table whose
transcripts open on demand.

Why two layouts: a report gets mailed and opened years later, so a small run is one
self-contained file; a real evaluation (10,000 attempts with hundreds of events each)
would make a page of gigabytes, so beyond `SINGLE_FILE_LIMIT` bytes of per-attempt data
the report is `report.html` plus `report_files/` (the attempt index and transcripts in
chunks, loaded by plain <script> tags, which work from file://): the first page stays
small whatever the run size. `single_file=True` (`--single-file`) forces one file.

The report is one streaming pass over the store (`report_data`): memory grows with
agents x datasets, not with attempts or transcript size.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from statebox.errors import UserError
from statebox.page_policy import page_policy, policy_meta
from statebox.replace_file import HTML_PAGE, refuse_unless_replaceable
from statebox.report.aggregate import AT_CEILING, NOT_ABOVE, TOO_FEW, AgentDatasetScore, prior_outcome
from statebox.report.attribution import FailureAttribution, attribution_json, outcomes
from statebox.report.assets import CSS, PAGE_JS
from statebox.report.trust_view import trust_html
from statebox.report.data import (
    ChunkSink,
    DatasetInfo,
    RunSummary,
    StoredRows,
    js_json,
    load_run_datasets,
    summarise,
)
from statebox.report.plots import (
    agent_means,
    agent_order,
    audit_svg,
    baseline_svg,
    best_baselines,
    confusion_svgs,
    cost_svg,
    curve_svgs,
    heatmap_svg,
)
from statebox.report.visible_text import visible_html

# the report's and the live view's policy: PAGE_JS alone, the chunk scripts it loads, the live view's API (page_policy.py)
PAGE_POLICY = page_policy(PAGE_JS, scripts_it_loads=True, own_origin_api=True)
PAGE_POLICY_META = policy_meta(PAGE_POLICY)
SINGLE_FILE_LIMIT = 5 * 1024 * 1024  # per-attempt data beyond this goes to REPORT_files/


def _e(text: Any) -> str:
    """Escaped for HTML, every hidden character spelt <U+XXXX> (report/visible_text.py)."""
    return visible_html(text)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.0f} KB"


# ---------------------------------------------------------------- summary (bounded by agents x datasets)


def _headline_sentence(scores: list[AgentDatasetScore], n_rows: int) -> str:
    if not scores:
        return "<p class=headline>No attempt has finished yet.</p>"
    order = agent_order(scores)
    means = agent_means(scores)
    base = best_baselines(scores)
    datasets = sorted({s.dataset for s in scores})
    best = order[0]
    parts = [f"Best: <b>{_e(best)}</b>, mean {_pct(means[best])} over {len(datasets)} dataset{'s' if len(datasets) != 1 else ''}"]
    if len(order) > 1 and means[best] is not None and means.get(order[1]) is not None:
        parts.append(f"next <b>{_e(order[1])}</b> {_pct(means[order[1]])} ({100 * (means[best] - means[order[1]]):+.1f})")  # type: ignore[operator]
    if base:
        vals = [v for v, _ in base.values()]
        parts.append(f"best chance/prior baseline, mean {_pct(sum(vals) / len(vals))}")
    own = [s for s in scores if s.best_of is None]  # a best-of row repeats its variant's attempts
    flagged = sum(n for s in own for k, n in s.verdict_counts.items() if k != "clean")
    voided = sum(int(s.extra.get("void_count", 0)) for s in own)
    parts += _prior_sentences(scores)
    if flagged:
        audit = (f"<span class=contaminated>audit: {flagged:,} of {n_rows:,} attempts flagged, {voided:,} voided</span>")
    else:
        audit = f"<span class=clean>audit: all {n_rows:,} attempts clean</span>"
    return "<p class=headline>" + " · ".join(parts) + " · " + audit + "</p>"


def _prior_sentences(scores: list[AgentDatasetScore]) -> list[str]:
    """The headline's verdicts against the best prior, three-way: an agent is listed as "not above"
    only where the interval test could have said "above" (`aggregate.compare_with_prior`); where
    it could not, the line says so ("too few items to tell") instead."""
    by_outcome: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for s in scores:
        outcome = prior_outcome(s)
        if outcome is not None:
            by_outcome[outcome][s.agent].append(s.dataset)
    out = []
    for outcome, label, css in ((NOT_ABOVE, "not above the best prior", "below-prior"),
                                (TOO_FEW, "too few items to tell against the best prior", "untold-prior"),
                                (AT_CEILING, "the best prior already at 100 on", "untold-prior")):
        agents = by_outcome.get(outcome)
        if not agents:
            continue
        if outcome == AT_CEILING:
            datasets = sorted({d for found in agents.values() for d in found})
            out.append(f"<span class={css}>{label} {_e(', '.join(datasets))}</span>")
            continue
        detail = "; ".join(f"{agent}: {', '.join(sorted(found))}" for agent, found in sorted(agents.items()))
        out.append(f"<span class={css} title='{_e(detail)}'>{label}: {_e(', '.join(sorted(agents)))}</span>")
    return out


def _row_class(s: AgentDatasetScore) -> str:
    names = (["best-of"] if s.best_of is not None else []) + (["below-prior"] if s.extra.get("beats_prior") is False else [])
    return f" class='{' '.join(names)}'" if names else ""


def _best_of_note(s: AgentDatasetScore) -> str:
    """A sweep's best-of row names its variant and lists every budget's score (the papers report the best)."""
    if s.best_of is None:
        return ""
    budgets = " · ".join(f"{_e(name.partition('@')[2])} {_pct(v)}" for name, v in s.extra.get("budgets", {}).items())
    return f"<br><small>best of {len(s.extra.get('budgets', {}))} budgets: {_e(s.best_of)} ({budgets})</small>"


def _vs_prior(s: AgentDatasetScore) -> str:
    """The margin over the best prior baseline; a row that does not beat it says so in words."""
    prior = s.extra.get("prior")
    if s.is_baseline:
        return "<small>baseline</small>"
    if not prior:
        return "-"
    value = s.headline_value
    margin = "-" if value is None else f"{100 * (value - prior['value']):+.1f}"
    outcome = prior_outcome(s)
    why = _e(f"{prior['name']} {_pct(prior['value'])}: {s.extra.get('beats_prior_reason') or ''}")
    if outcome == NOT_ABOVE:
        return f"<span class=below-prior title='{why}'>{margin} not above {_e(prior['name'])}</span>"
    if outcome in (TOO_FEW, AT_CEILING):
        return f"{margin} <span class=untold-prior title='{why}'>{_e(outcome)}</span>"
    return f"<span title='{why}'>{margin}</span>"


def _leaderboard(scores: list[AgentDatasetScore]) -> str:
    out = [
        "<table id='leaderboard' class='sortable'><thead><tr><th class=l>dataset</th><th class=l>agent</th><th class=l>metric</th>"
        "<th>score</th><th>vs best prior</th><th>95% CI</th><th>clean-only</th><th>voided</th>"
        "<th title='every flagged (suspicious or contaminated) attempt counted wrong'>flagged as wrong</th>"
        "<th>n</th><th class=l>audit</th><th class=l>status</th><th>tokens</th><th>cost $</th><th>s/attempt</th><th>frames decoded</th><th>model-visible frames</th></tr></thead><tbody>"
    ]
    for s in sorted(scores, key=lambda s: (s.dataset, -(s.report.metrics.get(s.headline) or 0.0))):
        m = s.headline
        ci = ((s.report.model_extra or {}).get("ci") or {}).get(m)
        audit = " ".join(f"<span class='{_e(k)}'>{_e(k)}:{v}</span>" for k, v in sorted(s.verdict_counts.items()))
        cats = ", ".join(f"{k}:{v}" for k, v in sorted(s.category_counts.items()))
        out.append(
            f"<tr{_row_class(s)}><td class=l>{_e(s.dataset)}</td><td class=l><b>{_e(s.agent)}</b>{_best_of_note(s)}</td>"
            f"<td class=l>{_e(m)}</td><td><b>{_pct(s.report.metrics.get(m))}</b></td><td>{_vs_prior(s)}</td>"
            f"<td>{_pct(ci[0]) + '-' + _pct(ci[1]) if ci else '-'}</td>"
            f"<td>{_pct(s.clean.metrics.get(m)) if s.clean else '-'}</td><td>{_pct(s.voided.metrics.get(m))}</td>"
            f"<td>{_pct(s.flagged_view.metrics.get(m))}</td><td>{s.n}</td><td class=l>{audit}{('<br><small>' + _e(cats) + '</small>') if cats else ''}</td>"
            f"<td class=l>{_e(', '.join(f'{k}:{v}' for k, v in sorted(s.status_counts.items())))}</td>"
            f"<td>{s.tokens}</td><td>{s.cost_usd:.4f}</td><td>{s.mean_duration_s:.1f}</td>"
            f"<td>{s.frames_decoded}</td><td>{s.frames_model}</td></tr>"
        )
    out.append("</tbody></table>")
    return "\n".join(out)


def _all_metrics(scores: list[AgentDatasetScore]) -> str:
    out = []
    for s in scores:
        cells = "".join(f"<td class=l>{_e(k)}</td><td>{'-' if v is None else f'{v:.4f}'}</td>" for k, v in s.report.metrics.items())
        out.append(f"<tr><td class=l>{_e(s.dataset)}</td><td class=l>{_e(s.agent)}</td>{cells}</tr>")
    return ("<table class='sortable'><thead><tr><th class=l>dataset</th><th class=l>agent</th>"
            "<th class=l colspan=99>metrics (all attempts)</th></tr></thead><tbody>" + "".join(out) + "</tbody></table>")


def _breakdowns(scores: list[AgentDatasetScore]) -> str:
    """One table per dataset: rows are `label=value` groups, columns the agents' headline metric."""
    by_dataset: dict[str, list[AgentDatasetScore]] = defaultdict(list)
    for s in scores:
        by_dataset[s.dataset].append(s)
    out = []
    for dataset, group in sorted(by_dataset.items()):
        keys = sorted({k for s in group for k in s.report.groups})
        if not keys:
            continue
        metric = group[0].headline
        head = "".join(f"<th>{_e(s.agent)}</th>" for s in group)
        out.append(f"<h3>{_e(dataset)} — {_e(metric)} by label</h3><table class='sortable'><thead><tr><th class=l>group</th><th>n</th>{head}</tr></thead><tbody>")
        for key in keys:
            n = next((s.report.groups[key].n for s in group if key in s.report.groups), 0)
            cells = "".join(
                f"<td>{_pct(s.report.groups[key].metrics.get(metric)) if key in s.report.groups else '-'}</td>" for s in group
            )
            out.append(f"<tr><td class=l>{_e(key)}</td><td>{n}</td>{cells}</tr>")
        out.append("</tbody></table>")
    return "\n".join(out)


def _attribution_html(found: list[FailureAttribution]) -> str:
    """Per failure-mode dataset, one table: agents x first failing step (number and share of the
    parent items attributed; the first epoch's, each further epoch on its own line)."""
    if not found:
        return ""
    names = outcomes()
    by_dataset: dict[str, list[FailureAttribution]] = defaultdict(list)
    for a in found:
        by_dataset[a.dataset].append(a)
    head = "".join(f"<th>{_e(n)}</th>" for n in names)
    out = []
    for dataset, group in sorted(by_dataset.items()):
        out.append(f"<h3>{_e(dataset)}</h3><table class='sortable attribution' data-dataset='{_e(dataset)}'><thead><tr>"
                   f"<th class=l>agent</th><th>epoch</th><th>parents</th>{head}</tr></thead><tbody>")
        for a in group:
            for epoch, counts in sorted(a.by_epoch.items()):
                total = sum(counts.values())
                cells = "".join(
                    f"<td data-step='{_e(n)}' data-n='{counts.get(n, 0)}'>{counts.get(n, 0)}"
                    f" <small>({_pct(counts.get(n, 0) / total if total else None)}%)</small></td>" for n in names)
                lead = "" if epoch == a.first_epoch else " class=later-epoch"
                out.append(f"<tr{lead} data-agent='{_e(a.agent)}' data-epoch='{epoch}'><td class=l><b>{_e(a.agent)}</b></td>"
                           f"<td>{epoch}</td><td>{total} of {a.parents}</td>{cells}</tr>")
        out.append("</tbody></table>")
    return "\n".join(out)


def glance_html(summary: RunSummary) -> str:
    """The first screen: the headline sentence and four pictures."""
    scores = summary.scores
    epochs = max([int(s.extra.get("epochs", 1)) for s in scores] + [1])
    ci_note = "95% CI" if epochs == 1 else f"scores average {epochs} epochs; 95% CI of the first epoch"
    datasets = [d.label for d in summary.datasets] + sorted({s.dataset for s in scores} - {d.label for d in summary.datasets})
    return (
        _headline_sentence(scores, summary.n_rows)
        + "<div id='glance'>"
        + "<figure class='wide'><figcaption>Score by agent and dataset "
          "<small class=sub>(headline metric; clean-only value and voided attempts in each cell)</small></figcaption>"
        + heatmap_svg(scores, datasets) + "</figure>"
        + "<figure><figcaption>Against the best chance/prior baseline <small class=sub>(" + ci_note + ")</small></figcaption>"
        + baseline_svg(scores, datasets) + "</figure>"
        + "<div class='stack'><figure><figcaption>Cost against score</figcaption>" + cost_svg(scores) + "</figure>"
        + "<figure><figcaption>Audit</figcaption>" + audit_svg(scores) + "</figure></div>"
        + "</div>"
    )


def summary_html(summary: RunSummary, *, plots: bool = True) -> str:
    """Everything above the attempt table (also the live view's refreshable fragment)."""
    edges = {d.label: d.curve_edges for d in summary.datasets}
    parts = [
        "<section id='at-a-glance'>", glance_html(summary), "</section>",
        "<h2 id='h-leaderboard'>Leaderboard</h2>",
        "<p class=sub>score = all attempts; clean-only = items whose attempts the auditor found clean; voided = attempts "
        "the policy voids (contaminated) answer nothing; flagged as wrong = every attempt the auditor flagged "
        "(suspicious or contaminated) counted wrong, as METR counts reward-hacked runs. Click a column to sort.</p>",
        _leaderboard(summary.scores),
        *(["<h2 id='h-trust'>Measured trust</h2>", trust_html(summary.trust)] if summary.trust is not None else []),
        "<h2>All metrics</h2>", _all_metrics(summary.scores),
        "<h2>Breakdown by label</h2>", _breakdowns(summary.scores),
    ]
    if summary.attribution:
        parts += [
            "<h2 id='h-attribution'>First failing step (failure-mode probes)</h2>",
            "<p class=sub>Per parent item of a failure-mode variant (<code>statebox bench variants --kind failure</code>): "
            "the first of its steps answered wrong, in order event recognition, entity association, state update, then "
            "the item's own question (<i>final</i>: every probe right, the final answer wrong); <i>correct</i>: every "
            "step right. Correctness as the attempt table's ✓ (all attempts); a parent counts once each of its steps "
            "has an attempt. The first epoch leads (as the CI); later epochs follow on their own lines.</p>",
            _attribution_html(summary.attribution),
        ]
    if plots:
        parts += [
            "<h2>Count confusion matrices</h2>", confusion_svgs(summary.confusions),
            "<h2>Per-query-time curves (streaming)</h2>", curve_svgs(summary.curves, edges),
        ]
    return "\n".join(parts)


ATTEMPTS_SECTION = """
<h2 id='h-attempts'>Attempts</h2>
<p class=sub>Filter, search and sort; click an attempt to open its transcript. The filters live in the address
(e.g. <code>#verdict=contaminated</code>, <code>#agent=oracle&amp;correct=incorrect</code>, <code>#open=0</code>).</p>
<div id='filters'>
<label>agent <select id='f-agent'></select></label>
<label>dataset <select id='f-dataset'></select></label>
<label>label <select id='f-label'></select></label>
<label>verdict <select id='f-verdict'></select></label>
<label>status <select id='f-status'></select></label>
<label>answer <select id='f-correct'><option value=''>all</option><option value='correct'>correct</option>
<option value='incorrect'>incorrect</option><option value='unscored'>unscored</option></select></label>
<label>search <input type='search' id='f-q' placeholder='question, answer, item, finding'></label>
<label><input type='checkbox' id='f-t'> also transcripts</label>
<button id='f-clear'>clear</button>
</div>
<div id='pager'><button id='prev'>‹ prev</button><span id='count' data-shown='0' data-total='0'>loading attempts…</span><button id='next'>next ›</button></div>
<table id='attempts'><thead><tr><th>#</th><th class=l>agent</th><th class=l>dataset</th><th class=l>item</th><th>query</th>
<th>epoch</th><th>✓</th><th class=l>verdict</th><th class=l>status</th><th class=l>answer</th><th class=l>findings</th>
<th>s</th><th>tokens</th><th>cost $</th></tr></thead><tbody id='attempt-rows'></tbody></table>
"""


def page_meta(summary: RunSummary | None, datasets: list[DatasetInfo], **extra: Any) -> dict[str, Any]:
    """What the page's script needs besides the attempt rows: names, items, chunk names."""
    tables = [d.item_table() for d in datasets]
    labels = sorted({lab for table in tables for it in table for lab in it[2]})
    meta: dict[str, Any] = {
        "items": tables,
        "labels": labels,
        "agents": summary.agents.names if summary else [],
        "datasets": summary.dataset_vocab.names if summary else [d.label for d in datasets],
        "verdicts": summary.verdicts.names if summary else [],
        "statuses": summary.statuses.names if summary else [],
        "actions": summary.actions.names if summary else [],
        "ichunks": [],
        "tchunks": [],
        "files": None,
        "live": False,
    }
    meta.update(extra)
    return meta


def page_head(title: str, subtitle: str) -> str:
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8>{PAGE_POLICY_META}<title>{_e(title)}</title>"
        f"<meta name=viewport content='width=device-width,initial-scale=1'><style>{CSS}</style></head><body>\n"
        f"<h1>statebox report</h1>\n<p class=sub>{subtitle}</p>\n"
        "<nav class=toc><a href='#at-a-glance'>at a glance</a><a href='#h-leaderboard'>leaderboard</a>"
        "<a href='#h-attempts'>attempts</a></nav>\n"
    )


def page_tail() -> str:
    return f"<script>{PAGE_JS}</script>\n</body></html>\n"


# ---------------------------------------------------------------- writing


@dataclass
class ReportOutput:
    path: Path
    bytes: int
    single_file: bool
    files_dir: Path | None
    files_count: int
    files_bytes: int
    scores: list[AgentDatasetScore]
    n_rows: int
    seconds: float
    transcripts_written: int = 0  # attempts whose transcript this report read and wrote
    transcripts_reused: int = 0  # attempts in chunks linked unchanged from the previous report
    transcript_seconds: float = 0.0  # time spent reading and writing transcript chunks (wall)
    trust: Any = None  # harness/trust.py:TrustOutcome when the run mixed impossible items / twins in
    attribution: list[FailureAttribution] = field(default_factory=list)  # failure-mode variants (report/attribution.py)

    @property
    def failure_attribution(self) -> dict[str, dict[str, dict[str, int]]]:
        """`{agent: {dataset: {step: n}}}` (first epoch): the `failure_attribution` key of `report --json`."""
        return attribution_json(self.attribution)

    def describe(self) -> str:
        if self.single_file:
            return f"{self.path} ({_mb(self.bytes)}, single file)"
        return (f"{self.path} ({_mb(self.bytes)}) + {self.files_dir.name if self.files_dir else '?'}/ "
                f"({self.files_count} files, {_mb(self.files_bytes)}; keep them together)")


def files_dir_for(out: Path) -> Path:
    return out.parent / f"{out.stem}_files"


def _our_folder(files_dir: Path) -> bool:
    """A folder standing at OUT_files itself, not a link to one (a run folder handed over may hold a link there)."""
    return files_dir.is_dir() and not files_dir.is_symlink()


def _a_report_s_files(files_dir: Path) -> bool:
    """OUT_files is a folder of its own holding nothing but entries named as a split report's chunk scripts (`NAME.js`,
    no folder among them): what a report may replace. A link among them (one planted in a handed-over run's last
    report) is removed with the folder, never followed (`rmtree` unlinks it)."""
    return _our_folder(files_dir) and all(p.suffix == ".js" and (p.is_symlink() or not p.is_dir())
                                          for p in files_dir.iterdir())


def _make_way(files_dir: Path) -> None:
    """Clear OUT_files for this report's folder: a link is removed, never followed (`rmtree` refused one with a
    traceback), the last report's folder removed whole. Anything else there is the user's and refused in one line:
    `--out ~/notes.html` removed a folder `~/notes_files` of the user's whole (found by probe)."""
    if files_dir.is_symlink():
        files_dir.unlink()
    elif _a_report_s_files(files_dir):
        shutil.rmtree(files_dir)
    elif os.path.lexists(files_dir):
        raise UserError(f"{files_dir}: holds what no report wrote; a split report puts its files there (remove it, or "
                        "give --out another name, or --single-file)")


def write_report_output(run_dir: Path, out: Path | None = None, *, single_file: bool = False,
                        split_over: int = SINGLE_FILE_LIMIT) -> ReportOutput:
    """Score the run's stored rows in one streaming pass and write the HTML report."""
    # The report builds many small objects and no garbage cycles worth collecting (its memory is
    # bounded by the streaming pass): the cyclic collector would only re-scan the loaded items.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _write_report_output(run_dir, out, single_file=single_file, split_over=split_over)
    finally:
        if was_enabled:
            gc.enable()


def _write_report_output(run_dir: Path, out: Path | None, *, single_file: bool, split_over: int) -> ReportOutput:
    started = time.perf_counter()
    run_dir = Path(run_dir)
    target = Path(out) if out else run_dir / "report.html"
    refuse_unless_replaceable(target, HTML_PAGE)  # `--out /dev/stdout`, `--out RUN/results.sqlite`: see replace_file
    datasets = load_run_datasets(run_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.stem}-", dir=target.parent))
    try:
        files_dir = files_dir_for(target)
        # transcript chunks the last report wrote for unchanged attempts are linked, not rewritten
        sink = ChunkSink(work / "chunks", previous=files_dir if _our_folder(files_dir) else None)
        summary = summarise(run_dir, datasets, sink)
        inline = single_file or sink.bytes <= split_over
        agents = ", ".join(summary.agents.names)
        subtitle = (f"run <code>{_e(run_dir)}</code> · {summary.n_rows:,} attempts · agents: {_e(agents)}"
                    f" · generated {time.strftime('%Y-%m-%d %H:%M')}")
        meta = page_meta(summary, datasets, ichunks=sink.index_chunks, tchunks=sink.transcript_chunks,
                         files=None if inline else files_dir.name)
        tmp_html = work / "report.html"
        with open(tmp_html, "wb") as fh:
            def put(text: str) -> None:
                fh.write(text.encode("utf-8"))

            put(page_head(f"statebox report · {run_dir.name}", subtitle))
            put("<div id='summary'>" + summary_html(summary) + "</div>\n")
            put(ATTEMPTS_SECTION)
            put(f"<script type='application/json' id='sb-meta'>{js_json(meta)}</script>\n")
            if inline:
                for name in sink.names():
                    put(f"<script type='application/json' id='c-{name}'>")
                    sink.inline_json(name, fh)
                    put("</script>\n")
            put(page_tail())
        files_count = files_bytes = 0
        if not inline:
            for name in sink.names():
                files_count += 1
                files_bytes += sink.path(name).stat().st_size
            _make_way(files_dir)
            os.replace(sink.folder, files_dir)
        elif _a_report_s_files(files_dir):
            shutil.rmtree(files_dir)  # a previous, split report of this run: now stale
        refuse_unless_replaceable(target, HTML_PAGE)
        os.replace(tmp_html, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return ReportOutput(
        path=target,
        bytes=target.stat().st_size,
        single_file=inline,
        files_dir=None if inline else files_dir,
        files_count=files_count,
        files_bytes=files_bytes,
        scores=summary.scores,
        n_rows=summary.n_rows,
        seconds=time.perf_counter() - started,
        transcripts_written=sink.written_attempts,
        transcripts_reused=sink.reused_attempts,
        transcript_seconds=sink.transcript_seconds,
        trust=summary.trust,
        attribution=summary.attribution,
    )


def write_report(run_dir: Path, out: Path | None = None, *, single_file: bool = False) -> tuple[Path, list[AgentDatasetScore], Iterable]:
    """Write the HTML report; returns (path, scores, rows), rows read back lazily from the store."""
    result = write_report_output(run_dir, out, single_file=single_file)
    return result.path, result.scores, StoredRows(Path(run_dir))
